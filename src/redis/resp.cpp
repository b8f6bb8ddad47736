// The wire (RESP) side of a Redis connection: commands written by us, replies copied out of
// hiredis' (whose memory is hiredis' own, freed when the callback returns).
#include "redis/resp.hpp"

#include <hiredis/async.h>
#include <hiredis/hiredis.h>

#include <charconv>
#include <string_view>

namespace zkcoro::detail {

redis_reply copy_reply(const void* p)
{
    const auto* r = static_cast<const redisReply*>(p);
    redis_reply out;
    switch (r->type) {
    case REDIS_REPLY_STATUS: out.type = redis_reply::kind::status; break;
    case REDIS_REPLY_ERROR: out.type = redis_reply::kind::error; break;
    case REDIS_REPLY_INTEGER: out.type = redis_reply::kind::integer; break;
    case REDIS_REPLY_STRING: out.type = redis_reply::kind::string; break;
    case REDIS_REPLY_ARRAY: out.type = redis_reply::kind::array; break;
    default: out.type = redis_reply::kind::nil; break;
    }
    out.integer = r->integer;
    if (r->str)
        out.str.assign(r->str, r->len);
    if (r->type == REDIS_REPLY_ARRAY) {
        out.elements.reserve(r->elements);
        for (std::size_t i = 0; i < r->elements; ++i)
            out.elements.push_back(copy_reply(r->element[i]));
    }
    return out;
}

namespace {

// Appends one bulk string of RESP: $<len>\r\n<bytes>\r\n.
void append_bulk(std::string& out, std::string_view a)
{
    char head[24];
    head[0] = '$';
    auto end = std::to_chars(head + 1, head + sizeof head - 2, a.size()).ptr;
    *end++ = '\r';
    *end++ = '\n';
    out.append(head, end);
    out.append(a);
    out.append("\r\n", 2);
}

}  // namespace

// The command is written in RESP here, into a buffer kept between calls (hiredis copies it):
// hiredis' own formatting (sdscatfmt per argument) cost more than the rest of a send.
int send_command(redisAsyncContext* ac, reply_callback* cb, void* privdata, const std::vector<std::string>& args,
                 const std::string* script)
{
    static thread_local std::string buf;
    buf.clear();
    char head[24];
    head[0] = '*';
    auto end = std::to_chars(head + 1, head + sizeof head - 2, args.size()).ptr;
    *end++ = '\r';
    *end++ = '\n';
    buf.append(head, end);
    std::size_t i = 0;
    if (script && args.size() >= 2) {
        append_bulk(buf, "EVAL");
        append_bulk(buf, *script);
        i = 2;
    }
    for (; i < args.size(); ++i)
        append_bulk(buf, args[i]);
    return redisAsyncFormattedCommand(ac, cb, privdata, buf.data(), buf.size());
}

}  // namespace zkcoro::detail
