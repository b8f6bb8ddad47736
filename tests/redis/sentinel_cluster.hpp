// A Redis master with replicas watched by sentinels, on free loopback ports (tests and the
// zkcoro-with-sentinel launcher): real redis-server processes (redis-server --sentinel for the
// sentinels), each ended by PID by its zktest::redis_server. Short sentinel timeouts:
// down-after-milliseconds 2000 (a sentinel PINGs every min(1 s, down-after) and first PINGs a new
// master 1 s after it links to it: with down-after at or below 1 s a healthy, freshly promoted
// master is marked down on a busy machine and failed over again); failover-timeout 2000 (the same
// master fails over again at the earliest 4 s later). A failover then takes about 3.3 s.
#pragma once

#include <redis_server.hpp>

#include <fmt/format.h>

#include <chrono>
#include <map>
#include <memory>
#include <sstream>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

namespace zktest {

struct sentinel_cluster_options {
    int replicas = 2;
    int sentinels = 3;
    std::string master_name = "zkm";
    // Lines appended to each data node's command line (e.g. an ACL user), and the password the
    // nodes require (masterauth too).
    std::vector<std::string> node_args{};
};

class sentinel_cluster {
public:
    explicit sentinel_cluster(sentinel_cluster_options o = {}) : opts_(std::move(o))
    {
        nodes_.push_back(std::make_unique<redis_server>(node_options({})));
        for (int i = 0; i < opts_.replicas; ++i)
            nodes_.push_back(std::make_unique<redis_server>(
                node_options({"--replicaof", "127.0.0.1", std::to_string(nodes_[0]->port())})));
        for (int i = 0; i < opts_.sentinels; ++i) {
            redis_options so;
            so.config_text = fmt::format(
                "sentinel monitor {0} 127.0.0.1 {1} {2}\n"
                "sentinel down-after-milliseconds {0} 2000\n"
                "sentinel failover-timeout {0} 2000\n",
                opts_.master_name, nodes_[0]->port(), opts_.sentinels / 2 + 1);
            so.extra_args = {"--sentinel"};
            sentinels_.push_back(std::make_unique<redis_server>(so));
        }
        wait_ready(std::chrono::seconds(20));
    }

    const std::string& master_name() const { return opts_.master_name; }

    // redis+sentinel://[userinfo@]127.0.0.1:S1,.../NAME
    std::string url(const std::string& userinfo = {}) const
    {
        std::string hosts;
        for (const auto& s : sentinels_)
            hosts += fmt::format("{}127.0.0.1:{}", hosts.empty() ? "" : ",", s->port());
        return fmt::format("redis+sentinel://{}{}{}/{}", userinfo, userinfo.empty() ? "" : "@", hosts,
                           opts_.master_name);
    }

    redis_server& sentinel(std::size_t i) { return *sentinels_.at(i); }
    std::size_t sentinel_count() const { return sentinels_.size(); }
    std::vector<std::unique_ptr<redis_server>>& nodes() { return nodes_; }

    // The master's port as the first sentinel that answers sees it (0 if none answers).
    std::uint16_t master_port() const
    {
        for (const auto& s : sentinels_) {
            if (!s->running())
                continue;
            try {
                auto a = s->command({"SENTINEL", "get-master-addr-by-name", opts_.master_name});
                return static_cast<std::uint16_t>(std::stoi(a.substr(a.find('\n') + 1)));
            } catch (const std::exception&) {
            }
        }
        return 0;
    }
    redis_server& node_at(std::uint16_t port)
    {
        for (auto& n : nodes_)
            if (n->port() == port)
                return *n;
        throw std::runtime_error(fmt::format("zktest: no node on port {}", port));
    }
    redis_server& master() { return node_at(master_port()); }

    // Waits until the master has `replicas` connected replicas and (with all_sentinels) every
    // sentinel knows the others; throws after `limit`.
    void wait_ready(std::chrono::milliseconds limit, int replicas = -1)
    {
        if (replicas < 0)
            replicas = opts_.replicas;
        const auto until = std::chrono::steady_clock::now() + limit;
        std::string last;
        while (std::chrono::steady_clock::now() < until) {
            try {
                bool ok = true;
                for (const auto& s : sentinels_) {
                    auto f = fields(s->command({"SENTINEL", "master", opts_.master_name}));
                    if (std::stoi(f["num-other-sentinels"]) < opts_.sentinels - 1 || f["flags"] != "master") {
                        ok = false;
                        last = fmt::format("sentinel {}: others {}, flags {}", s->port(), f["num-other-sentinels"],
                                           f["flags"]);
                    }
                }
                if (ok) {
                    auto info = master().info("replication");
                    int online = 0;  // connected is not enough: state=wait_bgsave until the full sync
                    for (const auto& [k, v] : info)
                        if (k.starts_with("slave") && v.find("state=online") != std::string::npos)
                            ++online;
                    if (info["role"] == "master" && online >= replicas)
                        return;
                    last = fmt::format("master {}: {} replicas online", master_port(), online);
                }
            } catch (const std::exception& e) {
                last = e.what();
            }
            std::this_thread::sleep_for(std::chrono::milliseconds(50));
        }
        throw std::runtime_error("zktest: the sentinel cluster is not ready: " + last);
    }

    // Waits until the sentinels name a master other than `old_port`; returns it (throws after limit).
    std::uint16_t wait_new_master(std::uint16_t old_port, std::chrono::milliseconds limit) const
    {
        const auto until = std::chrono::steady_clock::now() + limit;
        while (std::chrono::steady_clock::now() < until) {
            auto p = master_port();
            if (p != 0 && p != old_port)
                return p;
            std::this_thread::sleep_for(std::chrono::milliseconds(20));
        }
        throw std::runtime_error(fmt::format("zktest: no new master replaced {} within {} ms", old_port, limit.count()));
    }

    // A flat field/value array (one per line) as a map.
    static std::map<std::string, std::string> fields(const std::string& text)
    {
        std::map<std::string, std::string> out;
        std::istringstream in(text);
        std::string k, v;
        while (std::getline(in, k) && std::getline(in, v))
            out[k] = v;
        return out;
    }

private:
    redis_options node_options(std::vector<std::string> extra) const
    {
        redis_options o;
        o.extra_args = std::move(extra);
        // A replica's full sync at once (the default waits 5 s for more replicas to share it).
        for (const char* a : {"--repl-diskless-sync-delay", "0"})
            o.extra_args.emplace_back(a);
        for (const auto& a : opts_.node_args)
            o.extra_args.push_back(a);
        return o;
    }

    sentinel_cluster_options opts_;
    std::vector<std::unique_ptr<redis_server>> nodes_;
    std::vector<std::unique_ptr<redis_server>> sentinels_;
};

}  // namespace zktest
