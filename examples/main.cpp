// Shared entry point of the examples: reads the connect string (ZK_CONNECT, default
// 127.0.0.1:2181), runs co_main on an io_context, and reports errors.
#include "example.hpp"

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>

#include <cstdlib>
#include <exception>
#include <iostream>

int main(int argc, char** argv)
{
    zkcoro::client_config cfg;
    if (const char* env = std::getenv("ZK_CONNECT"))
        cfg.connect_string = env;
    cfg.session_timeout = std::chrono::seconds(4);
    boost::asio::io_context ioc;
    int status = 1;
    boost::asio::co_spawn(ioc, co_main(cfg, argc, argv), [&](std::exception_ptr e, int rc) {
        status = rc;
        if (e) {
            try {
                std::rethrow_exception(e);
            } catch (const std::exception& ex) {
                std::cerr << "error: " << ex.what() << "\n";
                status = 1;
            }
        }
    });
    ioc.run();
    return status;
}
