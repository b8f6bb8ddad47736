// What each example provides: a coroutine taking the client configuration.
#ifndef ZKCORO_EXAMPLES_EXAMPLE_HPP
#define ZKCORO_EXAMPLES_EXAMPLE_HPP

#include <zkcoro/zkcoro.hpp>

#include <boost/asio/awaitable.hpp>

boost::asio::awaitable<int> co_main(zkcoro::client_config cfg, int argc, char** argv);

#endif
