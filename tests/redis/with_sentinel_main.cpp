// zkcoro-with-sentinel -- CMD ARGS...
//
// Starts a Redis master, two replicas and three sentinels (tests/redis/sentinel_cluster.hpp) on
// free loopback ports, runs CMD with
//   ZKCORO_TEST_SENTINEL        redis+sentinel://127.0.0.1:S1,127.0.0.1:S2,127.0.0.1:S3/zkm
//   ZKCORO_TEST_SENTINEL_PORTS  S1,S2,S3
//   ZKCORO_TEST_MASTER_NAME     zkm
// then stops every server (by PID) and exits with CMD's exit code (125 if the cluster could not
// start; see run_child.hpp for the rest).
#include "sentinel_cluster.hpp"

#include <run_child.hpp>

#include <fmt/format.h>

#include <cstdio>
#include <cstdlib>
#include <exception>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

int main(int argc, char** argv)
{
    std::vector<std::string> cmd;
    int i = 1;
    if (i < argc && std::string_view(argv[i]) == "--")
        ++i;
    for (; i < argc; ++i)
        cmd.emplace_back(argv[i]);
    if (cmd.empty()) {
        std::fputs("usage: zkcoro-with-sentinel -- CMD [ARGS...]\n", stderr);
        return 2;
    }
    std::unique_ptr<zktest::sentinel_cluster> cluster;
    try {
        cluster = std::make_unique<zktest::sentinel_cluster>();
    } catch (const std::exception& e) {
        fmt::print(stderr, "zkcoro-with-sentinel: {}\n", e.what());
        return 125;
    }
    std::string ports;
    for (std::size_t s = 0; s < cluster->sentinel_count(); ++s)
        ports += fmt::format("{}{}", s ? "," : "", cluster->sentinel(s).port());
    fmt::print(stderr, "zkcoro-with-sentinel: master 127.0.0.1:{}, sentinels {}\n", cluster->master_port(), ports);
    setenv("ZKCORO_TEST_SENTINEL", cluster->url().c_str(), 1);
    setenv("ZKCORO_TEST_SENTINEL_PORTS", ports.c_str(), 1);
    setenv("ZKCORO_TEST_MASTER_NAME", cluster->master_name().c_str(), 1);
    const int code = zktest::run_child(cmd, "zkcoro-with-sentinel");
    cluster.reset();
    return code;
}
