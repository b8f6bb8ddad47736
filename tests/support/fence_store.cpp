#include "fence_store.hpp"

#include <fcntl.h>
#include <sys/file.h>
#include <time.h>
#include <unistd.h>

#include <fmt/format.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>
#include <stdexcept>

namespace zkfault {

namespace {

std::int64_t monotonic_ns()
{
    timespec ts{};
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return static_cast<std::int64_t>(ts.tv_sec) * 1'000'000'000 + ts.tv_nsec;
}

// One parsed store line; false when the line is not a store line.
bool parse_line(const std::string& line, std::string& id, std::int64_t& token, bool& accepted)
{
    std::istringstream in(line);
    std::string verdict;
    if (!(in >> id >> token >> verdict))
        return false;
    accepted = verdict == "accepted";
    return accepted || verdict == "rejected";
}

// Closes the descriptor (and so drops the flock) however the write ends.
struct fd_closer {
    int fd;
    ~fd_closer() { ::close(fd); }
};

}  // namespace

write_outcome write_token(const std::string& store, const std::string& id, std::int64_t token, bool check)
{
    const int fd = ::open(store.c_str(), O_RDWR | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    if (fd < 0)
        throw std::runtime_error(fmt::format("fence store {}: open: {}", store, std::strerror(errno)));
    fd_closer closer{fd};
    while (::flock(fd, LOCK_EX) != 0) {
        if (errno != EINTR)
            throw std::runtime_error(fmt::format("fence store {}: flock: {}", store, std::strerror(errno)));
    }
    // Under the lock: the highest accepted token so far decides.
    std::string content;
    char buf[65536];
    if (::lseek(fd, 0, SEEK_SET) < 0)
        throw std::runtime_error(fmt::format("fence store {}: lseek: {}", store, std::strerror(errno)));
    for (;;) {
        const ssize_t n = ::read(fd, buf, sizeof buf);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0)
            throw std::runtime_error(fmt::format("fence store {}: read: {}", store, std::strerror(errno)));
        if (n == 0)
            break;
        content.append(buf, static_cast<std::size_t>(n));
    }
    std::int64_t highest = 0;
    std::istringstream lines(content);
    std::string line;
    while (std::getline(lines, line)) {
        std::string who;
        std::int64_t t = 0;
        bool ok = false;
        if (parse_line(line, who, t, ok) && ok && t > highest)
            highest = t;
    }
    const bool accept = !check || token >= highest;
    const std::string out =
        fmt::format("{} {} {} {}\n", id, token, accept ? "accepted" : "rejected", monotonic_ns());
    // O_APPEND: the line goes to the end whatever the read offset.
    if (::write(fd, out.data(), out.size()) != static_cast<ssize_t>(out.size()))
        throw std::runtime_error(fmt::format("fence store {}: write: {}", store, std::strerror(errno)));
    return accept ? write_outcome::accepted : write_outcome::rejected;
}

store_audit audit_store(const std::string& store)
{
    store_audit a;
    std::ifstream in(store);
    std::string line;
    while (std::getline(in, line)) {
        std::string id;
        std::int64_t token = 0;
        bool accepted = false;
        if (!parse_line(line, id, token, accepted))
            continue;
        if (!accepted) {
            ++a.rejected;
            continue;
        }
        ++a.accepted;
        if (token < a.highest) {
            ++a.stale_accepted;
            a.stale_lines.push_back(fmt::format("{} (highest accepted before it: {})", line, a.highest));
        } else {
            a.highest = token;
        }
    }
    return a;
}

}  // namespace zkfault
