// One Redis connection on hiredis' asynchronous API, its socket read by Asio.
#include "redis/link.hpp"
#include "redis/resp.hpp"

#include <boost/asio/bind_executor.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/ip/tcp.hpp>

#include <fmt/format.h>

#include <hiredis/async.h>
#include <hiredis/hiredis.h>

#include <algorithm>
#include <array>
#include <optional>
#include <string_view>

#include <sys/socket.h>

#if ZKCORO_HIREDIS_PROCESS_CALLBACKS
// Runs the callbacks of the replies in a context's reader (redisAsyncHandleRead's second half):
// libhiredis exports it (0.14 to 1.2), no header declares it; meson.build checks it is there.
extern "C" void redisProcessCallbacks(redisAsyncContext* ac);
#endif

namespace zkcoro::detail {

// The socket of one hiredis context as an Asio socket. hiredis owns (and closes) the file
// descriptor: ours is released, never closed. Pending waits keep the attachment alive after the
// context is gone; they find `ac` null and do nothing.
struct redis_link::attachment : std::enable_shared_from_this<attachment> {
    // Over an io_context's own executor, the socket is on that executor and its handlers are bound
    // to the strand, typed: a completion then goes onto the strand in one typed step (through the
    // strand as the socket's type-erased executor it was wrapped in an executor_function first,
    // and the work tracked through it). Otherwise the socket is on the strand itself.
    attachment(const redis_strand& s, redisAsyncContext* c)
        : strand(s), typed(strand.target<asio::strand<asio::io_context::executor_type>>()),
          sd(typed ? asio::any_io_executor(typed->get_inner_executor()) : strand), ac(c)
    {
        // A TCP socket, not a plain descriptor: Asio knows a short read of a stream socket emptied
        // it and waits for the reactor before the next (not a read failing with EAGAIN). The
        // family only names the socket to Asio; hiredis made it.
        int family = AF_INET;
        socklen_t len = sizeof family;
        if (::getsockopt(c->c.fd, SOL_SOCKET, SO_DOMAIN, &family, &len) != 0)
            family = AF_INET;
        sd.assign(family == AF_INET6 ? asio::ip::tcp::v6() : asio::ip::tcp::v4(), c->c.fd);
    }

#if ZKCORO_HIREDIS_PROCESS_CALLBACKS
    // The replies are read here, into our buffer, and handed to hiredis' reader. Asio's read of a
    // stream is speculative, and after a read that emptied the socket it neither tries again nor
    // re-arms the descriptor: a command costs its write, the wait and this read. (Letting hiredis
    // read means waiting for readability, a wait Asio re-arms with an epoll_ctl each time.)
    void read()
    {
        if (read_pending || !ac)
            return;
        read_pending = true;
        on_strand([this](auto h) { sd.async_read_some(asio::buffer(in), std::move(h)); },
                  pooled([self = shared_from_this()](error_code ec, std::size_t n) {
            self->read_pending = false;
            if (ec == asio::error::operation_aborted || !self->ac || !self->want_read)
                return;
            {
                // What the replies' callbacks send is written once the read is done.
                scope s(self);
                if (!ec && n > 0 && (self->ac->c.flags & REDIS_CONNECTED)) {
                    // A reader that refuses the bytes has its error set; the callbacks' run meets
                    // it and ends the context. One reply awaited: its caller may go on inline.
                    const auto& r = self->ac->replies;
                    inline_completions one(r.head != nullptr && r.head == r.tail);  // op_state.hpp
                    redisReaderFeed(self->ac->c.reader, self->in.data(), n);
                    redisProcessCallbacks(self->ac);
                } else {
                    // The end of the stream or an error: hiredis reads the socket itself, meets
                    // the same, and ends the context with its own error.
                    redisAsyncHandleRead(self->ac);
                }
            }
            // The context may be gone now (cleanup cleared ac); else read on if still wanted.
            if (self->ac && self->want_read)
                self->read();
        }));
    }
#endif

    void wait(asio::socket_base::wait_type type)
    {
        bool read = type == asio::socket_base::wait_read;
        bool& pending = read ? read_pending : write_pending;
        if (pending || !ac)
            return;
        pending = true;
        on_strand([this, type](auto h) { sd.async_wait(type, std::move(h)); },
                  pooled([self = shared_from_this(), type, read](error_code ec) {
            (read ? self->read_pending : self->write_pending) = false;
            if (ec || !self->ac || !(read ? self->want_read : self->want_write))
                return;
            if (read) {
                // What the replies' callbacks send is written once the read is done.
                scope s(self);
                redisAsyncHandleRead(self->ac);
            } else {
                redisAsyncHandleWrite(self->ac);
            }
            // The context may be gone now (cleanup cleared ac); else wait again if still wanted.
            if (self->ac && (read ? self->want_read : self->want_write))
                self->wait(type);
        }));
    }

    // Writes what hiredis holds for the socket now, and waits for writability if the socket does
    // not take it all. On the strand, outside hiredis' calls.
    void write_now()
    {
        if (!ac || !want_write)
            return;
        redisAsyncHandleWrite(ac);
        if (ac && want_write)
            wait(asio::socket_base::wait_write);
    }

    // While a scope is open (a send, the read of replies), commands only queue their output; the
    // outermost scope's end writes it all, in that turn of the strand.
    struct scope {
        explicit scope(std::shared_ptr<attachment> a) : a_(std::move(a)) { ++a_->scopes; }
        scope(const scope&) = delete;
        scope& operator=(const scope&) = delete;
        ~scope()
        {
            if (--a_->scopes == 0)
                a_->write_now();
        }

    private:
        std::shared_ptr<attachment> a_;
    };

    static attachment* of(void* p) { return static_cast<attachment*>(p); }
    static void add_read(void* p)
    {
        of(p)->want_read = true;
#if ZKCORO_HIREDIS_PROCESS_CALLBACKS
        of(p)->read();
#else
        of(p)->wait(asio::socket_base::wait_read);
#endif
    }
    static void del_read(void* p) { of(p)->want_read = false; }
    // hiredis has output for the socket. On a connected context it is written without waiting for
    // the reactor to say the socket is writable (it nearly always is): at the end of the scope
    // that sent it, else from a turn of the strand of its own (one for all the commands sent
    // before it runs). What the socket does not take then waits for writability. (While
    // connecting, writability is what tells that the connection is made: there the reactor's
    // wait it is.)
    static void add_write(void* p)
    {
        auto* a = of(p);
        a->want_write = true;
        if (!a->ac || !(a->ac->c.flags & REDIS_CONNECTED))
            return a->wait(asio::socket_base::wait_write);
        if (a->scopes > 0 || a->write_posted)
            return;
        a->write_posted = true;
        asio::post(a->strand, pooled([self = a->shared_from_this()] {
            self->write_posted = false;
            self->write_now();
        }));
    }
    static void del_write(void* p) { of(p)->want_write = false; }
    static void cleanup(void* p)
    {
        auto* a = of(p);
        if (a->ac && a->link) {
            // The context is about to be freed: keep its error, then let the link carry on
            // outside hiredis.
            a->link->attempt_context_error(a->ac);
            a->link->ac_ = nullptr;  // hiredis frees it as soon as this returns
            asio::post(a->strand, [l = a->link->shared_from_this()] { l->on_context_gone(); });
        }
        a->ac = nullptr;
        a->want_read = a->want_write = false;
        error_code ignored;
        a->sd.cancel(ignored);
        a->sd.release(ignored);
    }

    // Starts `op` with `h` bound to the strand where the socket is not on it.
    template <class Op, class H>
    void on_strand(Op&& op, H&& h)
    {
        if (typed)
            op(asio::bind_executor(*typed, std::forward<H>(h)));
        else
            op(std::forward<H>(h));
    }

    const redis_strand strand;
    const asio::strand<asio::io_context::executor_type>* const typed;  // strand's target, if so
    asio::ip::tcp::socket sd;
    redisAsyncContext* ac;
    redis_link* link = nullptr;
    bool want_read = false, want_write = false;
    bool read_pending = false, write_pending = false;
    bool write_posted = false;  // add_write posted a write_now
    int scopes = 0;             // open scopes (see scope)
#if ZKCORO_HIREDIS_PROCESS_CALLBACKS
    std::array<char, 16384> in;  // what read() takes from the socket (hiredis' own read takes as much)
#endif
};

namespace {

error_code code_of(const redisAsyncContext* ac)
{
    switch (ac->err) {
    case REDIS_ERR_PROTOCOL: return redis_errc::not_redis;
    case REDIS_ERR_EOF: return redis_errc::connection_lost;
    default: return redis_errc::connection_lost;
    }
}

// What hiredis holds for a command until its reply (one per command: a recycled block).
struct pending_reply {
    std::shared_ptr<reply_op> op;
    std::shared_ptr<bool> alive;  // the link's (see reply_cb)

    static void* operator new(std::size_t n) { return block_cache::allocate(n); }
    static void operator delete(void* p, std::size_t n) noexcept { block_cache::deallocate(p, n); }
};

}  // namespace

redis_link::redis_link(redis_strand strand, redis_url url, redis_options opts, bool subscriber, hooks h)
    : strand_(std::move(strand)), url_(std::move(url)), opts_(std::move(opts)), subscriber_(subscriber),
      hooks_(std::move(h)), timer_(strand_)
{
}

redis_link::~redis_link()
{
    // Only when the executor shut down before close() ran: free the context without telling
    // anyone (their handlers are being destroyed with the executor's queue).
    if (ac_) {
        *alive_ = false;
        closing_ = true;
        if (att_)
            att_->link = nullptr;
        redisAsyncFree(ac_);
    }
}

void redis_link::connect_to(const redis_url::endpoint& e)
{
    url_.host = e.host;
    url_.port = e.port;
    redisAsyncContext* ac = redisAsyncConnect(url_.host.c_str(), url_.port);
    if (!ac) {
        fail_attempt(redis_errc::connect_failed, "out of memory");
        return on_context_gone();
    }
    if (ac->err) {
        fail_attempt(redis_errc::connect_failed, ac->errstr);
        redisAsyncFree(ac);  // no hooks attached yet: nothing calls back
        return on_context_gone();
    }
    ac_ = ac;
    scripts_sent_.clear();  // a new connection: the server may have lost its scripts
    poisoned_ = nullptr;
    att_ = std::make_shared<attachment>(strand_, ac);
    att_->link = this;
    ac->data = this;
    ac->ev.data = att_.get();
    ac->ev.addRead = &attachment::add_read;
    ac->ev.delRead = &attachment::del_read;
    ac->ev.addWrite = &attachment::add_write;
    ac->ev.delWrite = &attachment::del_write;
    ac->ev.cleanup = &attachment::cleanup;
    redisAsyncSetConnectCallback(ac, &redis_link::connect_cb);
    // The connection completes when the socket is writable.
    attachment::add_write(att_.get());
    timer_.expires_after(opts_.connect_timeout);
    timer_.async_wait([w = weak_from_this(), ac](error_code ec) {
        auto l = w.lock();
        if (ec || !l || l->ac_ != ac || l->ready_)
            return;
        l->fail_attempt(redis_errc::connect_failed,
                        fmt::format("no connection to {}:{} within {} ms", l->url_.host, l->url_.port,
                                    l->opts_.connect_timeout.count()));
        redisAsyncFree(ac);
    });
}

void redis_link::attempt_context_error(const redisAsyncContext* ac)
{
    if (ac->err == REDIS_ERR_PROTOCOL)
        fail_attempt(redis_errc::not_redis,
                     fmt::format("the peer at {}:{} does not speak the Redis protocol (hiredis: {})", url_.host,
                                 url_.port, ac->errstr[0] ? ac->errstr : "protocol error"));
    else if (ac->err == REDIS_ERR_EOF && !ready_ && !ever_connected_ && (ac->c.flags & REDIS_CONNECTED))
        // Connected, then closed with no answer to the handshake: a Redis server answers every
        // command (an error reply at worst); ZooKeeper's port, for one, closes on our bytes.
        fail_attempt(code_of(ac), fmt::format("the peer at {}:{} closed the connection without answering the "
                                              "handshake ({}): it did not speak RESP, Redis' protocol; probably not "
                                              "a Redis server",
                                              url_.host, url_.port, url_.password.empty() ? "PING" : "AUTH, PING"));
    else if (ac->err)
        fail_attempt(code_of(ac), ac->errstr[0] ? ac->errstr : "the connection dropped");
}

void redis_link::dispatch_send(command_args args, std::shared_ptr<reply_op> op, const std::string* script)
{
    if (op->done)
        return;  // cancelled while queued
    if (!ac_ || !ready_) {
        // The context ended under an earlier command of the same flush (its write failed).
        queue_.push_back(queued{std::vector<std::string>(args.begin(), args.end()), std::move(op), script});
        return;
    }
    // Kept to fail at once on close(); the done ones are dropped as the list grows.
    if (inflight_.size() >= inflight_prune_at_) {
        std::erase_if(inflight_, [](const std::weak_ptr<reply_op>& w) {
            auto o = w.lock();
            return !o || o->done;
        });
        inflight_prune_at_ = std::max<std::size_t>(64, inflight_.size() * 2);
    }
    inflight_.push_back(op);
    // A script this connection has not run yet goes as EVAL (which caches it on the server):
    // every EVALSHA after it on this connection runs after it, so finds it.
    const std::string* as_eval = nullptr;
    if (script && std::find(scripts_sent_.begin(), scripts_sent_.end(), script) == scripts_sent_.end())
        as_eval = script;
    auto* p = new pending_reply{std::move(op), alive_};
    // Alone on the connection (no reply awaited: one task's acquire or release), the command is
    // written at the end of this call, for its latency. Behind others (many tasks), its output
    // waits for the write posted by add_write, with every command sent before that runs: one
    // write for them all. The scope goes last: the write may end the context (its replies fail).
    std::optional<attachment::scope> written;
    if (ac_->replies.head == nullptr)
        written.emplace(att_);
    if (send_command(ac_, &redis_link::reply_cb, p, args, out_, as_eval) != REDIS_OK) {
        std::unique_ptr<pending_reply> owned(p);
        owned->op->fail(redis_errc::connection_lost);
        return;
    }
    if (as_eval)
        scripts_sent_.push_back(as_eval);
    ++sent;
}

void redis_link::noscript(redisAsyncContext* ac)
{
    // From here on the context's replies fail their commands (reply_cb), and new commands wait
    // for the next connection; the drop itself is posted (we are inside hiredis' read).
    poisoned_ = ac;
    if (ac_ == ac)
        ready_ = false;
    asio::post(strand_, [w = weak_from_this(), ac] {
        auto l = w.lock();
        if (!l || l->ac_ != ac || l->closing_)
            return;
        if (l->opts_.log)
            l->opts_.log(log_level::warn, fmt::format("redis {}:{}: NOSCRIPT: the server's script cache was emptied "
                                                      "(SCRIPT FLUSH); reconnecting to load the scripts again",
                                                      l->url_.host, l->url_.port));
        l->fail_attempt(redis_errc::connection_lost, "the server's script cache was emptied (NOSCRIPT)");
        l->backoff_ = std::chrono::milliseconds{0};
        l->free_context();
    });
}

void redis_link::reply_cb(redisAsyncContext* ac, void* reply, void* privdata)
{
    std::unique_ptr<pending_reply> p(static_cast<pending_reply*>(privdata));
    if (!*p->alive)
        return;  // the link is being destroyed at the executor's shutdown: nobody waits
    // The link that owns the context (ac->data, as handshake_cb reads it): alive while `alive`
    // says so, as its destructor clears that before it frees the context (whose callbacks run
    // inside the free). Read before the completion below, which may run its caller inline.
    auto* l = static_cast<redis_link*>(ac->data);
    if (!reply) {
        p->op->fail(l->closing_ ? error_code(redis_errc::closed) : code_of(ac));
        return;
    }
    const auto* raw = static_cast<const redisReply*>(reply);
    if (raw->type == REDIS_REPLY_ERROR && std::string_view(raw->str, raw->len).starts_with("NOSCRIPT")) {
        // Did not run; the commands behind it may have: none of them is answered (see send).
        if (l->poisoned_ != ac)
            l->noscript(ac);
        p->op->fail(redis_errc::connection_lost);
        return;
    }
    if (l->poisoned_ == ac) {
        p->op->fail(redis_errc::connection_lost);
        return;
    }
    auto r = copy_reply(reply);
    error_code ec;
    if (r.type == redis_reply::kind::error)
        ec = redis_error_code(r.str);
    if (ec == redis_errc::read_only && l->hooks_.resolve) {
        // Found through sentinels: the master was demoted under us. Find it again.
        asio::post(l->strand_, [l = l->shared_from_this()] { l->drop("READONLY: the server became a replica"); });
    }
    // An internal operation continues in this callback (on the strand, inside hiredis' read, which
    // takes new commands from it); any other is posted.
    if (p->op->inline_ok)
        p->op->complete_here(ec, std::move(r));
    else
        p->op->complete(ec, std::move(r));
}

void redis_link::free_context()
{
    if (ac_)
        redisAsyncFree(ac_);  // pending replies fail with connection_lost; cleanup posts on_context_gone
}

void redis_link::send(command_args args, std::shared_ptr<reply_op> op, const std::string* script)
{
    if (op->done)
        return;  // its caller gave up already (and its handler is gone)
    if (closing_ || state_ == redis_state::closed) {
        op->fail(last_code_ ? last_code_ : error_code(redis_errc::closed));
        return;
    }
    op->bind_cancellation();
    if (ac_ && ready_)
        return dispatch_send(args, std::move(op), script);
    queue_.push_back(queued{std::vector<std::string>(args.begin(), args.end()), std::move(op), script});
    start();
}

void redis_link::send_push(std::vector<std::string> args)
{
    if (state_ == redis_state::closed)
        return;
    if (!(ac_ && ready_)) {
        push_queue_.push_back(std::move(args));
        start();
        return;
    }
    send_command(ac_, &redis_link::push_cb, this, views_of(args), out_);
    ++sent;
}

void redis_link::push_cb(redisAsyncContext* ac, void* reply, void* privdata)
{
    (void)ac;
    if (!reply)
        return;  // the context goes; the link resubscribes after reconnecting
    auto* l = static_cast<redis_link*>(privdata);
    if (l->hooks_.push)
        l->hooks_.push(copy_reply(reply));
}

void redis_link::close()
{
    if (closing_)
        return;
    closing_ = true;
    timer_.cancel();
    auto q = std::move(queue_);
    queue_.clear();
    for (auto& item : q)
        item.op->fail(redis_errc::closed);
    push_queue_.clear();
    if (ac_ && ready_ && !subscriber_) {
        // Commands already sent fail with closed now; the connection still writes out what is
        // queued (the take-back of a cancelled acquisition) and ends once the replies are in,
        // or after a second at most.
        auto inflight = std::move(inflight_);
        inflight_.clear();
        for (auto& w : inflight)
            if (auto op = w.lock())
                op->fail(redis_errc::closed);
        redisAsyncDisconnect(ac_);
        if (!ac_)
            return;  // nothing pending: hiredis freed it (cleanup posts on_context_gone)
        timer_.expires_after(std::chrono::seconds(1));
        timer_.async_wait([w = weak_from_this(), ac = ac_](error_code ec) {
            auto l = w.lock();
            if (!ec && l && l->ac_ == ac)
                redisAsyncFree(ac);
        });
    } else if (ac_) {
        redisAsyncFree(ac_);  // pending replies fail with closed; cleanup posts on_context_gone
    } else {
        set_state(redis_state::closed);
    }
}

}  // namespace zkcoro::detail
