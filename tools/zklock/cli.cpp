// zklock's command line: the checks of option values, the usage line, usage errors (cli.hpp).
#include "cli.hpp"

#include "zklock.hpp"

#include <fmt/format.h>

#include <cerrno>
#include <cstdlib>
#include <string>
#include <string_view>
#include <utility>

namespace zklock {

std::string formatter::make_usage(const CLI::App* app, std::string name) const
{
    if (app->get_parent() != nullptr)
        return CLI::Formatter::make_usage(app, std::move(name));
    return std::string(synopsis);
}

CLI::Validator seconds_validator(double max, std::string_view what)
{
    return CLI::Validator(
        [max, what = std::string(what)](std::string& v) -> std::string {
            char* end = nullptr;
            errno = 0;
            const double d = std::strtod(v.c_str(), &end);
            if (v.empty() || end == nullptr || *end != '\0' || !(d >= 0 && d <= max))
                return fmt::format("needs {} from 0 to {:.0f}, got '{}'", what, max, escape(v));
            if (errno == ERANGE)
                return fmt::format("needs {} from 0 to {:.0f}, got '{}' (too small to tell from 0)", what, max,
                                   escape(v));
            return {};
        },
        "", "seconds");
}

CLI::Validator integer_validator(long lo, long hi, std::string_view what)
{
    return CLI::Validator(
        [lo, hi, what = std::string(what)](std::string& v) -> std::string {
            char* end = nullptr;
            errno = 0;
            const long n = std::strtol(v.c_str(), &end, 10);
            if (v.empty() || end == nullptr || *end != '\0' || errno == ERANGE)
                return fmt::format("needs a whole number ({} from {} to {}), got '{}'", what, lo, hi, escape(v));
            if (n < lo || n > hi)
                return fmt::format("needs {} from {} to {}, got {}", what, lo, hi, n);
            return {};
        },
        "", "integer");
}

bool parse_auth(std::string_view text, zkcoro::auth_info& out, std::string& why)
{
    while (!text.empty() && (text.back() == '\n' || text.back() == '\r' || text.back() == ' ' || text.back() == '\t'))
        text.remove_suffix(1);
    const auto colon = text.find(':');
    if (text.find('\n') != std::string_view::npos) {
        why = "one line expected: scheme:credentials, e.g. digest:USER:PASSWORD";
        return false;
    }
    if (colon == std::string_view::npos || colon == 0 || colon + 1 == text.size()) {
        why = "expected scheme:credentials, e.g. digest:USER:PASSWORD";
        return false;
    }
    out.scheme = std::string(text.substr(0, colon));
    out.credentials = std::string(text.substr(colon + 1));
    if (out.scheme == "digest" && (out.credentials.find(':') == std::string::npos || out.credentials.front() == ':')) {
        why = "digest credentials are USER:PASSWORD";
        return false;
    }
    return true;
}

int usage_error(std::string_view msg)
{
    tell("zklock: {}\nRun with --help for more information.\n", msg);
    return exit_code::usage;
}

std::string run_hint(const cli_values& v, std::string_view word)
{
    return v.has_separator ? fmt::format("; to run a command holding a lock or Redis key named '{}': zklock [OPTIONS] "
                                         "run {} -- COMMAND",
                                         word, word)
                           : std::string();
}

}  // namespace zklock
