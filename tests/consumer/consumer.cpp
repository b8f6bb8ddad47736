// Connects with zkcoro pulled in as a Meson subproject or found by CMake, and does one round trip.
#include <zkcoro/zkcoro.hpp>

#include <boost/asio.hpp>

#include <cstdlib>
#include <iostream>

int main()
{
    boost::asio::io_context ioc;
    zkcoro::client_config cfg;
    if (const char* env = std::getenv("ZK_CONNECT"))
        cfg.connect_string = env;
    zkcoro::client c(ioc.get_executor(), cfg);
    int rc = 1;
    boost::asio::co_spawn(ioc, [&]() -> boost::asio::awaitable<void> {
        co_await c.async_connect();
        auto r = co_await c.async_exists("/");
        std::cout << "consumer: connected, / has " << r.stat->num_children << " children" << std::endl;
        co_await c.async_close();
        rc = 0;
    }, boost::asio::detached);
    ioc.run();
    return rc;
}
