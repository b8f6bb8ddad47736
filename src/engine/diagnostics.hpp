// The diagnostic of a failed lock operation (internal): which operation on which path, which
// session on which server, and what to do about it.
#ifndef ZKCORO_SRC_ENGINE_DIAGNOSTICS_HPP
#define ZKCORO_SRC_ENGINE_DIAGNOSTICS_HPP

#include <zkcoro/client.hpp>

#include <string>
#include <string_view>

namespace zkcoro::detail {

// What a user can do about `ec` (pure: unit-tested), e.g. for ZNOAUTH "add credentials ...".
std::string_view advice(const error_code& ec) noexcept;

// "acquire /locks/a failed: ZNOAUTH: ... (session 0x1f2e, server 127.0.0.1:2181): add ..."
std::string describe_failure(const client& zk, std::string_view operation, std::string_view path, const error_code& ec);

}  // namespace zkcoro::detail

#endif
