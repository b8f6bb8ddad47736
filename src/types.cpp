#include <zkcoro/types.hpp>

namespace zkcoro {

std::string_view to_string(watch_event_type t) noexcept
{
    switch (t) {
    case watch_event_type::created: return "created";
    case watch_event_type::deleted: return "deleted";
    case watch_event_type::data_changed: return "data_changed";
    case watch_event_type::children_changed: return "children_changed";
    }
    return "unknown";
}

std::string_view to_string(session_state s) noexcept
{
    switch (s) {
    case session_state::connecting: return "connecting";
    case session_state::connected: return "connected";
    case session_state::suspended: return "suspended";
    case session_state::expired: return "expired";
    case session_state::closed: return "closed";
    }
    return "unknown";
}

std::string_view to_string(log_level l) noexcept
{
    switch (l) {
    case log_level::error: return "error";
    case log_level::warn: return "warn";
    case log_level::info: return "info";
    case log_level::debug: return "debug";
    }
    return "unknown";
}

}  // namespace zkcoro
