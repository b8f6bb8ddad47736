// The diagnostic of a failed lock operation (internal): which operation on which path, which
// session on which server, and what to do about it.
#ifndef ZKCORO_SRC_ZOOKEEPER_DIAGNOSTICS_HPP
#define ZKCORO_SRC_ZOOKEEPER_DIAGNOSTICS_HPP

#include <zkcoro/client.hpp>

#include <string>
#include <string_view>

namespace zkcoro::detail {

// What a user can do about `ec` (pure: unit-tested), e.g. for ZNOAUTH "add credentials ...".
std::string_view advice(const error_code& ec) noexcept;

// "acquire /locks/a (session 0x1f2e, server 127.0.0.1:2181): add credentials ..."
std::string failure_context(const client& zk, std::string_view operation, std::string_view path, const error_code& ec);

// The context and the error's message: "acquire /locks/a (...): add ...: ZNOAUTH: not authenticated".
std::string describe_failure(const client& zk, std::string_view operation, std::string_view path, const error_code& ec);

// Logs describe_failure at warn level through the client's sink.
void log_failure(const client& zk, std::string_view operation, std::string_view path, const error_code& ec);

// Throws boost::system::system_error with the code and the context (what() then ends with the
// code's message), for the throwing acquire() forms.
[[noreturn]] void throw_failure(const client& zk, std::string_view operation, std::string_view path, const error_code& ec);

}  // namespace zkcoro::detail

#endif
