// check_config: a client_config checked before anything is sent, with the reason in words.
#include "driver/connect_string.hpp"

#include <zkcoro/client_config.hpp>
#include <zkcoro/error.hpp>

#include <chrono>
#include <string>

namespace zkcoro {

namespace {

error_code fail(client_errc e, std::string* why, std::string text)
{
    if (why)
        *why = std::move(text);
    return make_error_code(e);
}

}  // namespace

error_code check_config(const client_config& cfg, std::string* why)
{
    if (std::string text; !detail::parse_connect_string(cfg.connect_string, &text))
        return fail(client_errc::invalid_connect_string, why, std::move(text));
    if (cfg.session_timeout.count() <= 0 || cfg.session_timeout > std::chrono::hours(24))
        return fail(client_errc::invalid_argument, why, "session_timeout must be in (0, 24h]");
    if (cfg.connect_timeout.count() < 0)
        return fail(client_errc::invalid_argument, why, "connect_timeout must not be negative");
    if (cfg.ping_interval > std::chrono::hours(24))
        return fail(client_errc::invalid_argument, why, "ping_interval must be at most 24h (negative: off, 0: derived)");
    if (cfg.ping_timeout.count() < 0 || cfg.ping_timeout > std::chrono::hours(24))
        return fail(client_errc::invalid_argument, why, "ping_timeout must be in [0, 24h] (0: derived)");
    if (cfg.max_data_size == 0 || cfg.max_data_size > 0x7fffffff)
        return fail(client_errc::invalid_argument, why, "max_data_size must be in [1, 2^31)");
    for (const auto& a : cfg.auth)
        if (a.scheme.empty())
            return fail(client_errc::invalid_argument, why, "auth scheme is empty");
    for (const auto& e : cfg.default_acl)
        if (e.perms < 0 || e.perms > perm::all || e.scheme.empty())
            return fail(client_errc::invalid_argument, why,
                        "default_acl: perms must be in [0, 31] and the scheme non-empty");
    if (cfg.resume_session && cfg.resume_session->password.size() > 16)
        return fail(client_errc::invalid_argument, why, "resume_session: password longer than 16 bytes");
    return {};
}

}  // namespace zkcoro
