#include "tcp_proxy.hpp"

// At -O2, GCC 12 reports -Wnull-dereference inside Asio's inlined scheduler
// code (not ours), should the project enable that warning for this file.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wnull-dereference"
#endif

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/awaitable.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/experimental/channel.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/write.hpp>

#include <fmt/format.h>

#include <algorithm>
#include <atomic>
#include <future>
#include <optional>
#include <set>
#include <stdexcept>
#include <thread>
#include <utility>
#include <vector>

namespace zktest {

namespace asio = boost::asio;
using tcp = asio::ip::tcp;
using steady = std::chrono::steady_clock;
using boost::system::error_code;

namespace {

constexpr auto use_tuple = asio::as_tuple(asio::use_awaitable);
constexpr std::size_t chunk_size = 16 * 1024;
// Chunks queued per direction before the reader waits (back-pressure).
constexpr std::size_t queue_chunks = 16;

// One read from a socket, stamped with the time it may be written out.
struct chunk {
    steady::time_point due{};
    std::vector<char> data;
    bool eof = false;
};

using chunk_channel = asio::experimental::channel<void(error_code, chunk)>;

struct session;

// Proxy-wide settings and bookkeeping; only touched on the proxy's thread,
// except the atomics, which other threads read.
struct proxy_state {
    tcp::endpoint target;
    bool blackhole = false;
    bool refuse = false;
    std::chrono::milliseconds delay{0};
    std::optional<std::size_t> next_reply_allowance;  // mute_replies_after()
    std::set<std::shared_ptr<session>> sessions;
    std::atomic<std::size_t> accepted{0};
    std::atomic<std::size_t> open{0};
};

// One proxied connection: client <-> upstream, a queue per direction.
struct session {
    session(asio::io_context& io, proxy_state& st, tcp::socket c)
        : state(st), client(std::move(c)), upstream(io), to_upstream(io, queue_chunks), to_client(io, queue_chunks),
          upstream_timer(io), client_timer(io) {}

    proxy_state& state;
    tcp::socket client;
    tcp::socket upstream;
    chunk_channel to_upstream;
    chunk_channel to_client;
    asio::steady_timer upstream_timer;
    asio::steady_timer client_timer;
    bool upstream_connected = false;
    // Accepted during a blackhole: no upstream connection was ever made.
    bool orphan = false;
    // mute_replies(): the server's bytes are dropped.
    bool muted = false;
    // mute_replies_after(): how many more of the server's bytes pass (then none).
    std::optional<std::size_t> reply_allowance;
    bool closed = false;
    int directions_done = 0;

    void close(bool reset) {
        if (closed) return;
        closed = true;
        error_code ec;
        if (reset) client.set_option(tcp::socket::linger(true, 0), ec);
        client.close(ec);
        upstream.close(ec);
        // Closing the channels and timers wakes every coroutine of this
        // session, so they all finish and release it.
        to_upstream.close();
        to_client.close();
        upstream_timer.cancel();
        client_timer.cancel();
        --state.open;
        // Erasing may drop the last owner only after the coroutines ended,
        // since each of them holds a shared_ptr too.
        for (auto it = state.sessions.begin(); it != state.sessions.end(); ++it)
            if (it->get() == this) {
                state.sessions.erase(it);
                break;
            }
    }

    // Both directions ended by EOF: nothing more can flow.
    void direction_finished() {
        if (++directions_done == 2) close(false);
    }
};

// Reads from one side and queues chunks for the other side's writer.
asio::awaitable<void> read_side(std::shared_ptr<session> s, bool from_client) {
    tcp::socket& from = from_client ? s->client : s->upstream;
    chunk_channel& out = from_client ? s->to_upstream : s->to_client;
    std::vector<char> buf(chunk_size);
    for (;;) {
        auto [ec, n] = co_await from.async_read_some(asio::buffer(buf), use_tuple);
        if (s->closed) co_return;
        // A blackhole drops bytes and FINs alike, as a partition would.
        const bool drop = s->state.blackhole || !s->upstream_connected || (!from_client && s->muted);
        if (ec == asio::error::eof) {
            if (s->orphan) {
                s->close(false);
                co_return;
            }
            if (drop) {
                s->direction_finished();
                co_return;
            }
            chunk c;
            c.eof = true;
            c.due = steady::now() + s->state.delay;
            co_await out.async_send(error_code{}, std::move(c), use_tuple);
            co_return;
        }
        if (ec) {
            s->close(false);
            co_return;
        }
        if (drop) continue;
        if (!from_client && s->reply_allowance) {
            // Not `muted`, which would drop the bytes passed here too while queued.
            n = std::min(n, *s->reply_allowance);
            *s->reply_allowance -= n;
            if (n == 0) continue;
        }
        chunk c;
        c.due = steady::now() + s->state.delay;
        c.data.assign(buf.begin(), buf.begin() + static_cast<std::ptrdiff_t>(n));
        auto [send_ec] = co_await out.async_send(error_code{}, std::move(c), use_tuple);
        if (send_ec) co_return;
    }
}

// Takes queued chunks, waits until each is due and writes it to one side.
asio::awaitable<void> write_side(std::shared_ptr<session> s, bool to_client) {
    tcp::socket& to = to_client ? s->client : s->upstream;
    chunk_channel& in = to_client ? s->to_client : s->to_upstream;
    asio::steady_timer& timer = to_client ? s->client_timer : s->upstream_timer;
    for (;;) {
        auto [ec, c] = co_await in.async_receive(use_tuple);
        if (ec || s->closed) co_return;
        if (c.due > steady::now()) {
            timer.expires_at(c.due);
            co_await timer.async_wait(use_tuple);
            if (s->closed) co_return;
        }
        // Bytes queued before a blackhole (or mute) started are dropped, not replayed.
        if (s->state.blackhole || (to_client && s->muted)) {
            if (c.eof) {
                s->direction_finished();
                co_return;
            }
            continue;
        }
        if (c.eof) {
            error_code sec;
            to.shutdown(tcp::socket::shutdown_send, sec);
            s->direction_finished();
            co_return;
        }
        auto [wec, written] = co_await asio::async_write(to, asio::buffer(c.data), use_tuple);
        if (wec) {
            if (!s->closed) s->close(false);
            co_return;
        }
        (void)written;
    }
}

asio::awaitable<void> run_session(std::shared_ptr<session> s) {
    auto ex = co_await asio::this_coro::executor;
    // Blackholed at accept time: never connect upstream, just swallow bytes.
    if (s->state.blackhole) {
        s->orphan = true;
    } else {
        auto [ec] = co_await s->upstream.async_connect(s->state.target, use_tuple);
        if (s->closed) co_return;
        if (ec) {
            // Upstream down: the client sees its connection closed.
            s->close(false);
            co_return;
        }
        s->upstream_connected = true;
        error_code oec;
        s->upstream.set_option(tcp::no_delay(true), oec);
        asio::co_spawn(ex, read_side(s, false), asio::detached);
        asio::co_spawn(ex, write_side(s, true), asio::detached);
        asio::co_spawn(ex, write_side(s, false), asio::detached);
    }
    co_await read_side(s, true);
}

asio::awaitable<void> accept_loop(tcp::acceptor& acceptor, proxy_state& state) {
    auto ex = co_await asio::this_coro::executor;
    for (;;) {
        auto [ec, sock] = co_await acceptor.async_accept(use_tuple);
        if (!acceptor.is_open()) co_return;
        if (ec) {
            // E.g. out of file descriptors: back off instead of spinning.
            asio::steady_timer t(ex, std::chrono::milliseconds(10));
            co_await t.async_wait(use_tuple);
            continue;
        }
        ++state.accepted;
        error_code oec;
        if (state.refuse) {
            // RST rather than FIN: closest to "connection refused".
            sock.set_option(tcp::socket::linger(true, 0), oec);
            sock.close(oec);
            continue;
        }
        sock.set_option(tcp::no_delay(true), oec);
        auto& io = static_cast<asio::io_context&>(ex.context());
        auto s = std::make_shared<session>(io, state, std::move(sock));
        s->reply_allowance = std::exchange(state.next_reply_allowance, std::nullopt);
        state.sessions.insert(s);
        ++state.open;
        asio::co_spawn(ex, run_session(s), asio::detached);
    }
}

bool is_loopback_host(const std::string& h) { return h == "127.0.0.1" || h == "localhost" || h == "::1"; }

}  // namespace

struct tcp_proxy::impl {
    asio::io_context io{1};
    asio::executor_work_guard<asio::io_context::executor_type> guard{io.get_executor()};
    tcp::acceptor acceptor{io};
    proxy_state state;
    std::uint16_t port = 0;
    std::thread thread;
    std::promise<void> thread_done;

    // Runs f on the proxy thread and returns once it has run.
    template <class F>
    void run_on_io(F&& f) {
        if (io.get_executor().running_in_this_thread()) {
            f();
            return;
        }
        std::promise<void> done;
        auto fut = done.get_future();
        asio::post(io, [&] {
            f();
            done.set_value();
        });
        fut.get();
    }

    void close_all(bool reset) {
        // close() erases from the set: iterate over a copy.
        auto all = state.sessions;
        for (auto& s : all) s->close(reset);
    }
};

tcp_proxy::tcp_proxy(std::string target_host, std::uint16_t target_port) : impl_(std::make_unique<impl>()) {
    if (!is_loopback_host(target_host))
        throw std::invalid_argument(fmt::format("zktest::tcp_proxy: target {} is not loopback", target_host));
    auto addr = target_host == "localhost" ? asio::ip::make_address("127.0.0.1") : asio::ip::make_address(target_host);
    impl_->state.target = tcp::endpoint(addr, target_port);

    auto& a = impl_->acceptor;
    a.open(tcp::v4());
    a.set_option(tcp::acceptor::reuse_address(true));
    a.bind(tcp::endpoint(asio::ip::address_v4::loopback(), 0));
    a.listen();
    impl_->port = a.local_endpoint().port();

    asio::co_spawn(impl_->io, accept_loop(impl_->acceptor, impl_->state), asio::detached);
    impl_->thread = std::thread([i = impl_.get()] {
        i->io.run();
        i->thread_done.set_value();
    });
}

tcp_proxy::~tcp_proxy() {
    impl_->run_on_io([&] {
        error_code ec;
        impl_->acceptor.close(ec);
        impl_->close_all(false);
    });
    // With everything closed all coroutines finish and run() returns; if
    // something still waits after 2 s, stop the loop anyway.
    impl_->guard.reset();
    if (impl_->thread_done.get_future().wait_for(std::chrono::seconds(2)) != std::future_status::ready)
        impl_->io.stop();
    impl_->thread.join();
}

std::uint16_t tcp_proxy::port() const { return impl_->port; }

std::string tcp_proxy::address() const { return fmt::format("127.0.0.1:{}", impl_->port); }

void tcp_proxy::cut(cut_mode mode) {
    impl_->run_on_io([&] { impl_->close_all(mode == cut_mode::reset); });
}

void tcp_proxy::set_blackhole(bool on) {
    impl_->run_on_io([&] {
        const bool was = impl_->state.blackhole;
        impl_->state.blackhole = on;
        if (was && !on) {
            // Connections accepted during the blackhole have no upstream.
            auto all = impl_->state.sessions;
            for (auto& s : all)
                if (s->orphan) s->close(false);
        }
    });
}

void tcp_proxy::set_refuse(bool on) {
    impl_->run_on_io([&] { impl_->state.refuse = on; });
}

void tcp_proxy::set_delay(std::chrono::milliseconds d) {
    impl_->run_on_io([&] { impl_->state.delay = d; });
}

void tcp_proxy::mute_replies() {
    impl_->run_on_io([&] {
        for (auto& s : impl_->state.sessions) s->muted = true;
    });
}

void tcp_proxy::mute_replies_after(std::size_t bytes) {
    impl_->run_on_io([&] { impl_->state.next_reply_allowance = bytes; });
}

std::size_t tcp_proxy::accepted() const { return impl_->state.accepted.load(); }

std::size_t tcp_proxy::open_connections() const { return impl_->state.open.load(); }

}  // namespace zktest
