// The wire (RESP) side of a Redis connection (internal; hiredis is included by redis/link.cpp,
// redis/handshake.cpp and redis/resp.cpp only).
#ifndef ZKCORO_SRC_REDIS_RESP_HPP
#define ZKCORO_SRC_REDIS_RESP_HPP

#include "redis/link.hpp"

#include <initializer_list>
#include <string>
#include <string_view>
#include <vector>

struct redisAsyncContext;

namespace zkcoro::detail {

// hiredis' reply callback type (redisCallbackFn), spelled out so that hiredis stays out of this header.
using reply_callback = void(redisAsyncContext*, void*, void*);

// Copies a hiredis reply (a redisReply*).
redis_reply copy_reply(const void* reply);

// Sends one command; `privdata` goes to `cb` with the reply (or null when the context goes).
// With `script`, args[0] and args[1] (EVALSHA, its SHA1) are sent as EVAL and the script.
// The command is written into `buf` (the link's, kept between calls; hiredis copies it).
// Returns hiredis' REDIS_OK or REDIS_ERR.
int send_command(redisAsyncContext* ac, reply_callback* cb, void* privdata, command_args args, std::string& buf,
                 const std::string* script = nullptr);
inline int send_command(redisAsyncContext* ac, reply_callback* cb, void* privdata,
                        std::initializer_list<std::string_view> args, std::string& buf)
{
    return send_command(ac, cb, privdata, command_args(args.begin(), args.size()), buf);
}

}  // namespace zkcoro::detail

#endif
