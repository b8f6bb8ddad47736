// The wire (RESP) side of a Redis connection: commands written by us, replies copied out of
// hiredis' (whose memory is hiredis' own, freed when the callback returns).
#include "redis/resp.hpp"

#include <hiredis/async.h>
#include <hiredis/hiredis.h>

#include <charconv>
#include <cstring>
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

// The decimal digits of n.
std::size_t digits(std::size_t n)
{
    std::size_t d = 1;
    while (n >= 10) {
        n /= 10;
        ++d;
    }
    return d;
}

// The size of one bulk string of RESP: $<len>\r\n<bytes>\r\n.
std::size_t bulk_size(std::string_view a) { return 1 + digits(a.size()) + 2 + a.size() + 2; }

// Writes a RESP header (`*` or `$`, then n) at p; returns the end.
char* put_head(char* p, char kind, std::size_t n)
{
    *p++ = kind;
    p = std::to_chars(p, p + 20, n).ptr;
    *p++ = '\r';
    *p++ = '\n';
    return p;
}

char* put_bulk(char* p, std::string_view a)
{
    p = put_head(p, '$', a.size());
    std::memcpy(p, a.data(), a.size());
    p += a.size();
    *p++ = '\r';
    *p++ = '\n';
    return p;
}

}  // namespace

// The command is written in RESP here, sized first and then filled in, into a buffer kept between
// calls (hiredis copies it): hiredis' own formatting (sdscatfmt per argument) cost more than the
// rest of a send. The buffer is the link's own (a thread-local one cost three __tls_get_addr calls
// per command in the shared library).
int send_command(redisAsyncContext* ac, reply_callback* cb, void* privdata, command_args args, std::string& buf,
                 const std::string* script)
{
    constexpr std::string_view eval = "EVAL";
    const bool as_eval = script && args.size() >= 2;
    const std::size_t from = as_eval ? 2 : 0;
    std::size_t size = 1 + digits(args.size()) + 2;
    if (as_eval)
        size += bulk_size(eval) + bulk_size(*script);
    for (std::size_t i = from; i < args.size(); ++i)
        size += bulk_size(args[i]);
    // One byte more for a NUL after the command: hiredis reads a SUBSCRIBE's channels with
    // strchr, past the length it was given, as its own formatting always ends in one. Without it,
    // a longer command's bytes left in the buffer were read as more channels, and past the end.
    if (buf.size() < size + 1)
        buf.resize(size + 1);
    char* p = put_head(buf.data(), '*', args.size());
    if (as_eval) {
        p = put_bulk(p, eval);
        p = put_bulk(p, *script);
    }
    for (std::size_t i = from; i < args.size(); ++i)
        p = put_bulk(p, args[i]);
    *p = '\0';
    return redisAsyncFormattedCommand(ac, cb, privdata, buf.data(), static_cast<std::size_t>(p - buf.data()));
}

}  // namespace zkcoro::detail
