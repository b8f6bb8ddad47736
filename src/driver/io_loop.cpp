// The I/O loop: zookeeper_interest() tells which socket, which readiness and which deadline the
// C library needs; we wait for them on a dup() of its fd and a steady_timer, then let
// zookeeper_process() do the work, and ask again. The lock is held in all of these.
#include "driver/client_impl.hpp"

#include <zkcoro/error.hpp>

#include <fmt/format.h>

#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

namespace zkcoro::detail {

// ---------------------------------------------------------------------------------------------
// The I/O loop (lock held in all of these)

void client_impl::drop_socket()
{
    if (desc_.is_open()) {
        // The error_code overloads: nothing may throw out of io_context::run.
        error_code ignored;
        desc_.cancel(ignored);
        desc_.close(ignored);
    }
    ++desc_gen_;
    read_pending_ = write_pending_ = false;
    lib_fd_ = -1;
    sock_dev_ = 0;
    sock_ino_ = 0;
    socket_checked_at_ = ~std::uint64_t{0};
}

void client_impl::rearm()
{
    if (!zh_ || closed_)
        return;
    if (in_library_ == 0) {
        apply_pending_servers();  // a new member list (driver/ensemble.cpp), before the next pick
        steer_next_server();
    }
    int fd = -1, interest = 0;
    timeval tv{};
    ++in_library_;
    int rc = zookeeper_interest(zh_, &fd, &interest, &tv);
    --in_library_;
    if (!zh_)
        return;
    if (in_library_ == 0)
        note_attempt(rc);
    if (rc != ZOK && rc != ZCONNECTIONLOSS && rc != ZOPERATIONTIMEOUT && rc != ZNOTHING) {
        // ZINVALIDSTATE after expiry or failed authentication: the watcher has been told, or
        // will be at the next zookeeper_process; keep a timer so that happens.
        fd = -1;
        interest = 0;
        tv = {0, 50000};
    }
    // The library closes and reopens its socket on reconnect, often under the same fd number:
    // tell sockets apart by (fd, device, inode), and let go of a stale dup at once.
    if (fd == -1) {
        if (desc_.is_open())
            drop_socket();
    } else {
        struct ::stat st{};
        bool same = desc_.is_open() && fd == lib_fd_ && socket_checked_at_ == session_events_ &&
                    zoo_state(zh_) == ZOO_CONNECTED_STATE;
        if (!same && ::fstat(fd, &st) == 0) {
            same = desc_.is_open() && fd == lib_fd_ && st.st_dev == sock_dev_ && st.st_ino == sock_ino_;
            if (same && zoo_state(zh_) == ZOO_CONNECTED_STATE)
                socket_checked_at_ = session_events_;
        }
        if (!same) {
            drop_socket();
            int d = ::dup(fd);
            error_code ec;
            if (d >= 0)
                desc_.assign(d, ec);
            if (d >= 0 && ec) {
                log(log_level::error, fmt::format("cannot watch the ZooKeeper socket: {}", ec.message()));
                ::close(d);
                d = -1;
            }
            if (d >= 0) {
                lib_fd_ = fd;
                sock_dev_ = st.st_dev;
                sock_ino_ = st.st_ino;
            }
        }
        if (desc_.is_open()) {
            if ((interest & ZOOKEEPER_READ) && !read_pending_)
                start_wait(false);
            if ((interest & ZOOKEEPER_WRITE) && !write_pending_)
                start_wait(true);
        }
    }
    auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(tv.tv_sec) +
                    std::chrono::microseconds(tv.tv_usec);
    // The library counts in milliseconds from "now", so the deadline it asks for wobbles by up to
    // one between calls. Re-arming for that costs a reactor wake-up (epoll_ctl, epoll_wait): a
    // timer up to timer_slack late is harmless (pings are due at a third of the session timeout).
    constexpr auto timer_slack = std::chrono::milliseconds(2);
    if (!timer_pending_ || deadline + timer_slack < timer_deadline_) {
        timer_deadline_ = deadline;
        timer_.expires_at(deadline);
        timer_pending_ = true;
        auto gen = ++timer_gen_;
        timer_.async_wait(pooled([self = shared_from_this(), gen](const error_code& ec) {
            self->on_timer(gen, ec);
        }));
    }
}

void client_impl::start_wait(bool write)
{
    (write ? write_pending_ : read_pending_) = true;
    desc_.async_wait(write ? asio::posix::stream_descriptor::wait_write
                           : asio::posix::stream_descriptor::wait_read,
                     pooled([self = shared_from_this(), gen = desc_gen_, write](const error_code& ec) {
                         self->on_ready(gen, write ? ZOOKEEPER_WRITE : ZOOKEEPER_READ, ec);
                     }));
}

void client_impl::on_ready(std::uint64_t gen, int events, const error_code& ec)
{
    zk_guard g(this);
    if (gen != desc_gen_ || closed_ || !zh_)
        return;
    (events == ZOOKEEPER_WRITE ? write_pending_ : read_pending_) = false;
    if (ec == make_error_code(asio::error::operation_aborted))
        return;
    process(events);
    rearm();
}

void client_impl::on_timer(std::uint64_t gen, const error_code& ec)
{
    zk_guard g(this);
    if (gen != timer_gen_ || closed_ || !zh_)
        return;
    timer_pending_ = false;
    if (ec == make_error_code(asio::error::operation_aborted))
        return;
    process(0);
    rearm();
}

void client_impl::process(int events)
{
    auto before = delivered_;
    ++in_library_;
    int rc = zookeeper_process(zh_, events);
    --in_library_;
    // Readable and still connected: the library read bytes from the server (the end of the
    // stream or an error would have dropped the connection). Saves a FIONREAD per wake-up.
    if ((events & ZOOKEEPER_READ) && rc == ZOK && zh_ && zoo_state(zh_) == ZOO_CONNECTED_STATE)
        mark_heard();
    // The library reads one packet per call: drain what is already buffered, in bounded steps,
    // while each call delivers a reply or a watch event (readiness is reported again if more
    // remains: the next wait's EPOLL_CTL_MOD re-reports a readable socket). Only while requests
    // are outstanding: the last reply, the common case, then costs no read; a watch event or
    // ping reply still buffered is reported by the next wait. A pipelined reply (the listing
    // behind the create, the delete behind its watch event) costs no system call beyond its read.
    if (events & ZOOKEEPER_READ) {
        for (int i = 0; i < 256 && rc == ZOK && zh_ && !need_recreate_ && !need_release_ && ops_head_ != nullptr &&
                        delivered_ != before;
             ++i)
        {
            before = delivered_;
            ++in_library_;
            rc = zookeeper_process(zh_, ZOOKEEPER_READ);
            --in_library_;
        }
    }
    if (need_release_ && zh_) {
        need_release_ = false;
        retire_handle(nullptr);
    }
    if (need_recreate_ && zh_) {
        need_recreate_ = false;
        retire_handle(nullptr);
        apply(fsm_.on_handle_recreated());
        begin_handle();
    }
}

}  // namespace zkcoro::detail
