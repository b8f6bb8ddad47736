// One Redis connection's handshake: the connection callback, then AUTH, SELECT, PING (and ROLE
// when the server was found through sentinels), each reply checked before the link is ready.
#include "redis/link.hpp"
#include "redis/resp.hpp"

#include <fmt/format.h>

#include <hiredis/async.h>
#include <hiredis/hiredis.h>

#include <memory>

namespace zkcoro::detail {

namespace {

struct handshake_step {
    redis_link* link;
    int step;
};

}  // namespace

void redis_link::connect_cb(const redisAsyncContext* ac, int status)
{
    static_cast<redis_link*>(ac->data)->on_connected(status);
}

void redis_link::on_connected(int status)
{
    if (status != REDIS_OK) {
        fail_attempt(redis_errc::connect_failed,
                     fmt::format("cannot connect to {}:{}: {}", url_.host, url_.port, ac_ && ac_->errstr[0] ? ac_->errstr : "refused"));
        return;  // hiredis frees the context: cleanup follows
    }
    // The handshake: AUTH, SELECT, then PING (which a server that is not Redis cannot answer).
    if (!url_.password.empty() && !url_.user.empty())
        send_command(ac_, &redis_link::handshake_cb, new handshake_step{this, 0}, {"AUTH", url_.user, url_.password},
                     out_);
    else if (!url_.password.empty())
        send_command(ac_, &redis_link::handshake_cb, new handshake_step{this, 0}, {"AUTH", url_.password}, out_);
    if (url_.db != 0)
        send_command(ac_, &redis_link::handshake_cb, new handshake_step{this, 1}, {"SELECT", std::to_string(url_.db)},
                     out_);
    send_command(ac_, &redis_link::handshake_cb, new handshake_step{this, 2}, {"PING"}, out_);
    // Found through sentinels: it must be the master (a sentinel may still name a master that was
    // demoted, or one that is being replaced).
    if (!url_.sentinels.empty())
        send_command(ac_, &redis_link::handshake_cb, new handshake_step{this, 3}, {"ROLE"}, out_);
}

void redis_link::handshake_cb(redisAsyncContext* ac, void* reply, void* privdata)
{
    std::unique_ptr<handshake_step> st(static_cast<handshake_step*>(privdata));
    if (st->link->closing_)
        return;
    if (!reply) {
        st->link->attempt_context_error(ac);
        return;
    }
    st->link->handshake_reply(st->step, reply);
}

void redis_link::handshake_reply(int step, const void* reply)
{
    // A step of this attempt failed already: the replies after it (the PONG of the pipelined
    // PING) must not make the link ready.
    if (attempt_code_)
        return;
    auto r = copy_reply(reply);
    if (r.type == redis_reply::kind::error) {
        if (step == 0 && !url_.user.empty())
            fail_attempt(redis_errc::auth_failed, fmt::format("AUTH as user '{}' refused by {}:{}: {}", url_.user,
                                                              url_.host, url_.port, r.str));
        else if (step == 0)
            fail_attempt(redis_errc::auth_failed, fmt::format("AUTH refused by {}:{}: {}", url_.host, url_.port, r.str));
        else if (step == 3)
            fail_attempt(redis_errc::not_master, fmt::format("ROLE refused by {}:{}: {}", url_.host, url_.port, r.str));
        else if (step == 1)
            fail_attempt(redis_errc::error_reply,
                         fmt::format("SELECT {} refused by {}:{}: {}", url_.db, url_.host, url_.port, r.str));
        else if (r.str.starts_with("NOAUTH"))
            fail_attempt(redis_errc::auth_failed, fmt::format("{}:{} needs a password: {}", url_.host, url_.port, r.str));
        else if (const auto code = redis_error_code(r.str); code == redis_errc::loading || code == redis_errc::master_down)
            // A server loading its data (after a start), a replica without its master: for now.
            fail_attempt(code, fmt::format("PING refused by {}:{}: {}", url_.host, url_.port, r.str));
        else
            fail_attempt(redis_errc::error_reply, fmt::format("PING refused: {}", r.str));
        if (ac_)
            redisAsyncDisconnect(ac_);
        return;
    }
    if (step == 3) {
        if (r.type != redis_reply::kind::array || r.elements.empty() || r.elements[0].str != "master") {
            fail_attempt(redis_errc::not_master,
                         fmt::format("{}:{}, named by the sentinels as master '{}', says it is a {} (ROLE)", url_.host,
                                     url_.port, url_.master_name,
                                     r.elements.empty() ? std::string("?") : r.elements[0].str));
            if (ac_)
                redisAsyncDisconnect(ac_);
            return;
        }
        return ready();
    }
    if (step != 2)
        return;
    if (r.type != redis_reply::kind::status || r.str != "PONG") {
        fail_attempt(redis_errc::not_redis,
                     fmt::format("the peer at {}:{} does not speak the Redis protocol (its answer to PING is not PONG)",
                                 url_.host, url_.port));
        if (ac_)
            redisAsyncDisconnect(ac_);
        return;
    }
    if (url_.sentinels.empty())
        ready();
}

void redis_link::ready()
{
    ready_ = true;
    ever_connected_ = true;
    backoff_ = std::chrono::milliseconds{0};
    ++connects;
    timer_.cancel();
    if (!subscriber_)
        redisAsyncSetDisconnectCallback(ac_, nullptr);
    set_state(redis_state::connected);
    flush();
    if (hooks_.ready)
        hooks_.ready();
}

}  // namespace zkcoro::detail
