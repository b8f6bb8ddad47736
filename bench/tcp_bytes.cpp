// The bytes a process has received over TCP, for zkcoro-scale-bench: a translation unit of its
// own because <linux/tcp.h> (whose struct tcp_info has tcpi_bytes_received) cannot share one with
// glibc's <netinet/tcp.h>, which Asio includes.
#include <linux/tcp.h>

#include <netinet/in.h>
#include <sys/socket.h>

#include <charconv>
#include <cstddef>
#include <filesystem>
#include <string>
#include <system_error>

// The sum of tcpi_bytes_received over the process's TCP sockets (/proc/self/fd): the replies of
// its servers, the queue listings among them. A connection closed between two reads takes its
// bytes with it: the bench counts on one connection for the whole run.
long long tcp_bytes_received()
{
    namespace fs = std::filesystem;
    long long sum = 0;
    std::error_code ec;
    for (fs::directory_iterator it("/proc/self/fd", ec), end; !ec && it != end; it.increment(ec)) {
        const auto name = it->path().filename().string();
        int fd = -1;
        if (std::from_chars(name.data(), name.data() + name.size(), fd).ec != std::errc())
            continue;
        tcp_info info{};
        socklen_t len = sizeof info;
        if (::getsockopt(fd, IPPROTO_TCP, TCP_INFO, &info, &len) == 0 &&
            len >= offsetof(tcp_info, tcpi_bytes_received) + sizeof info.tcpi_bytes_received)
            sum += static_cast<long long>(info.tcpi_bytes_received);
    }
    return sum;
}
