// Every asynchronous operation of zkcoro hands Asio an initiation object that knows the I/O
// object's executor: partial completion tokens (asio::cancel_after on newer Boost, as_tuple
// around them) ask the initiation for it. A probe token checks it without starting anything.
#include <zkcoro/zkcoro.hpp>

#include <boost/asio/io_context.hpp>

#include <doctest/doctest.h>

namespace {

namespace asio = boost::asio;

// A completion token whose initiation only records the initiation's executor; the operation is
// never started.
struct executor_probe {
    asio::any_io_executor* seen;
};

}  // namespace

template <class... Signatures>
struct boost::asio::async_result<executor_probe, Signatures...> {
    template <class Initiation, class... Args>
    static void initiate(Initiation&& init, executor_probe probe, Args&&...)
    {
        *probe.seen = init.get_executor();
    }
};

using namespace zkcoro;
using namespace std::chrono_literals;

TEST_CASE("every async operation's initiation carries the object's executor")
{
    asio::io_context ioc;
    client c(ioc.get_executor(), client_config{"127.0.0.1:1"});
    const asio::any_io_executor expected = ioc.get_executor();
    auto check = [&](auto&& start) {
        asio::any_io_executor seen;
        start(executor_probe{&seen});
        CHECK(seen == expected);
    };
    check([&](auto t) { c.async_connect(t); });
    check([&](auto t) { c.async_exists("/a", t); });
    mutex m(c, "/locks/a");
    check([&](auto t) { m.async_acquire(1, 1s, t); });
    check([&](auto t) { m.async_participants(t); });
    shared_mutex rw(c, "/locks/rw");
    check([&](auto t) { rw.async_participants(t); });
    semaphore s(c, "/locks/s", 2);
    check([&](auto t) { s.async_acquire(1, 1s, t); });
    check([&](auto t) { s.async_participants(t); });
    semaphore_mutex sm(c, "/locks/sm");
    check([&](auto t) { sm.async_acquire(1, 1s, t); });
    check([&](auto t) { sm.async_participants(t); });
    multi_lock ml({lock_ref(m), lock_ref(rw.reader())});
    check([&](auto t) { ml.async_acquire(1, 1s, t); });
    check([&](auto t) { ml.async_participants(t); });
    lock_ref ref(m);
    check([&](auto t) { ref.async_acquire(1, 1s, t); });

    // An empty guard has no client: its operations still have an executor (a system executor).
    guard g;
    asio::any_io_executor seen;
    g.async_release(executor_probe{&seen});
    CHECK(seen == g.get_executor());
    CHECK(seen == asio::any_io_executor(asio::system_executor()));
    watch w;
    asio::any_io_executor seen_w;
    w.async_wait(executor_probe{&seen_w});
    CHECK(seen_w == w.get_executor());
}
