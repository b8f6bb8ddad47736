// The tree scan: a walk of the tree under a root with a bounded number of requests in flight,
// every lock path's queue read (one read per node) and ordered by its recipe's rule
// (recipes/scan_rules.cpp). Runs on a strand of the client's executor, with callbacks: a
// listing or a read that completes queues the next requests.
#include "async/op_state.hpp"
#include "recipes/scan_rules.hpp"

#include <zkcoro/path.hpp>
#include <zkcoro/scan.hpp>

#include <boost/asio/bind_executor.hpp>
#include <boost/asio/strand.hpp>

#include <algorithm>
#include <deque>
#include <map>
#include <memory>
#include <optional>
#include <set>

namespace zkcoro::detail {

namespace {

// A directory with lock nodes, waiting for its nodes' reads.
struct pending_dir {
    std::string path;
    dir_kind kind = dir_kind::none;
    std::vector<std::optional<participant>> nodes;
    std::size_t remaining = 0;
};

struct read_job {
    std::shared_ptr<pending_dir> dir;
    std::size_t slot = 0;
};

class scan_state : public std::enable_shared_from_this<scan_state> {
public:
    scan_state(client& c, scan_options o, std::shared_ptr<op_state<scan_result>> op)
        : zk_(c), strand_(asio::make_strand(c.get_executor())), max_(std::max<std::size_t>(1, o.max_in_flight)),
          op_(std::move(op))
    {
    }

    void start(std::string root)
    {
        root_ = root;
        asio::dispatch(strand_, [self = shared_from_this(), root = std::move(root)]() mutable {
            self->lists_.push_back(std::move(root));
            self->pump();
        });
    }

private:
    void pump()
    {
        while (in_flight_ < max_ && (!reads_.empty() || !lists_.empty())) {
            // Reads first: they complete the locks already found and keep few of them pending.
            if (!reads_.empty()) {
                auto job = std::move(reads_.front());
                reads_.pop_front();
                send_read(std::move(job));
            } else {
                auto path = std::move(lists_.front());
                lists_.pop_front();
                send_list(std::move(path));
            }
            sent();
        }
        if (in_flight_ == 0 && reads_.empty() && lists_.empty())
            finish();
    }

    // One more request outstanding, counted.
    void sent()
    {
        ++in_flight_;
        ++result_.requests;
        result_.max_in_flight_seen = std::max(result_.max_in_flight_seen, in_flight_);
    }

    void send_list(std::string path)
    {
        zk_.async_get_children(path, asio::bind_executor(strand_, [self = shared_from_this(), path](
                                                                      error_code ec, children_result r) mutable {
                                   --self->in_flight_;
                                   self->listed(std::move(path), ec, std::move(r.children));
                                   self->pump();
                               }));
    }

    void send_read(read_job job)
    {
        const std::string path = join_path(job.dir->path, job.dir->nodes[job.slot]->name);
        zk_.async_get_data(path, asio::bind_executor(strand_, [self = shared_from_this(), job, path](
                                                                   error_code ec, data_result d) mutable {
                               --self->in_flight_;
                               self->read(std::move(job), std::move(path), ec, std::move(d));
                               self->pump();
                           }));
    }

    // The session or the connection went: the rest of the tree cannot be read either.
    static bool fatal(error_code ec) { return is_session_lost(ec) || is_retriable(ec); }

    // The scan fails with the first fatal error; nothing more is sent.
    void fail(error_code ec)
    {
        if (!failed_)
            failed_ = ec;
        reads_.clear();
        lists_.clear();
    }

    void listed(std::string path, error_code ec, std::vector<std::string> names)
    {
        ++result_.nodes_listed;
        if (ec) {
            if (path == root_ || fatal(ec))
                fail(ec);
            else if (ec != zk_errc::no_node)
                result_.problems.push_back({path, ec});
            return;
        }
        if (std::find(names.begin(), names.end(), "leases") != names.end() &&
            std::find(names.begin(), names.end(), "locks") != names.end())
            semaphores_.insert(path);
        const dir_kind kind = kind_of(names);
        std::shared_ptr<pending_dir> dir;
        if (kind != dir_kind::none) {
            // Only the children that take a place in the queue are read (a lock path with
            // thousands of plain children has no thousands of waiters).
            auto members = queue_members(kind, names);
            dir = std::make_shared<pending_dir>();
            dir->path = path;
            dir->kind = kind;
            dir->remaining = members.size();
            for (auto& m : members) {
                participant p;
                p.name = std::move(m);
                dir->nodes.emplace_back(std::move(p));
                reads_.push_back(read_job{dir, dir->nodes.size() - 1});
            }
        }
        for (auto& n : names)
            if (!is_lock_node_name(n))
                lists_.push_back(join_path(path, n));  // may hold locks below
        if (failed_) {
            reads_.clear();
            lists_.clear();
        } else if (dir && dir->remaining == 0) {
            complete(*dir);
        }
    }

    // A node whose data we may not read: its Stat (exists needs no permission) still tells its
    // session and age.
    void send_exists(read_job job, std::string path)
    {
        sent();
        zk_.async_exists(path, asio::bind_executor(strand_, [self = shared_from_this(), job, path](
                                                                error_code ec, exists_result e) mutable {
                             --self->in_flight_;
                             data_result d;
                             if (!ec && !e.stat)
                                 ec = zk_errc::no_node;
                             if (!ec)
                                 d.stat = *e.stat;
                             self->read(std::move(job), std::move(path), ec, std::move(d), true);
                             self->pump();
                         }));
    }

    void read(read_job job, std::string path, error_code ec, data_result d, bool unreadable = false)
    {
        if (ec == zk_errc::no_auth && !unreadable && !failed_)
            return send_exists(std::move(job), std::move(path));
        auto& dir = *job.dir;
        auto& slot = dir.nodes[job.slot];
        if (ec) {
            if (fatal(ec))
                fail(ec);
            else if (ec != zk_errc::no_node)
                result_.problems.push_back({path, ec});
            slot.reset();  // gone since the listing: no longer in the queue
        } else {
            slot->path = std::move(path);
            slot->data = std::move(d.data);
            slot->session_id = d.stat.ephemeral_owner;
            slot->ctime = d.stat.ctime;
            slot->czxid = d.stat.czxid;
            slot->data_unreadable = unreadable;
        }
        if (--dir.remaining == 0)
            complete(dir);
    }

    void complete(pending_dir& dir)
    {
        std::vector<participant> nodes;
        for (auto& n : dir.nodes)
            if (n)
                nodes.push_back(std::move(*n));
        lock_info info;
        info.path = dir.path;
        info.kind = dir.kind == dir_kind::read_write     ? lock_kind::read_write
                    : dir.kind == dir_kind::leader_latch ? lock_kind::leader_latch
                                                         : lock_kind::mutex;
        order_queue(dir.kind, std::move(nodes), info.holders, info.waiters);
        if (dir.kind == dir_kind::leases)
            leases_[std::string(parent_path(dir.path))] = std::move(info);
        else
            result_.locks.push_back(std::move(info));
    }

    // A semaphore acquires (Curator's InterProcessSemaphoreV2, zkcoro's alike) by taking the
    // entry mutex (<path>/locks), creating a lease node, and, while there are more lease nodes
    // than the semaphore's size, waiting with the entry mutex held. So the entry mutex's
    // holder, when the newest lease node is of its session, waits on that lease; those queued on
    // the entry mutex wait behind it. (For one round trip after a grant the entry mutex is still
    // held by a new holder: a scan at that instant shows it waiting.)
    static void split_semaphore(lock_info& s, lock_info entry)
    {
        if (!entry.holders.empty()) {
            const participant& head = entry.holders.front();
            if (!s.holders.empty() && s.holders.back().session_id == head.session_id &&
                s.holders.back().mode == lock_mode::lease) {
                participant waiting = std::move(s.holders.back());
                s.holders.pop_back();
                waiting.holds = false;
                s.waiters.push_back(std::move(waiting));
            } else {
                participant waiting = head;  // no lease node yet
                waiting.holds = false;
                s.waiters.push_back(std::move(waiting));
            }
        }
        s.waiters.insert(s.waiters.end(), std::make_move_iterator(entry.waiters.begin()),
                         std::make_move_iterator(entry.waiters.end()));
    }

    // A semaphore is its leases (held) and its entry queue (<path>/locks, waiting), one lock.
    void merge_semaphores()
    {
        std::vector<lock_info> out;
        for (auto& l : result_.locks) {
            const std::string parent(parent_path(l.path));
            if (node_name(l.path) == "locks" && l.kind == lock_kind::mutex && semaphores_.count(parent)) {
                auto& s = leases_[parent];
                s.path = parent;
                split_semaphore(s, std::move(l));
                continue;
            }
            out.push_back(std::move(l));
        }
        for (auto& [path, s] : leases_) {
            s.path = path;
            s.kind = lock_kind::semaphore;
            out.push_back(std::move(s));
        }
        std::sort(out.begin(), out.end(), [](const lock_info& a, const lock_info& b) { return a.path < b.path; });
        result_.locks = std::move(out);
    }

    void finish()
    {
        if (finished_)
            return;
        finished_ = true;
        if (failed_) {
            op_->complete(failed_, scan_result{});
            return;
        }
        merge_semaphores();
        op_->complete(error_code{}, std::move(result_));
    }

    client& zk_;
    asio::strand<asio::any_io_executor> strand_;
    std::size_t max_;
    std::shared_ptr<op_state<scan_result>> op_;
    std::string root_;
    std::deque<read_job> reads_;
    std::deque<std::string> lists_;
    std::size_t in_flight_ = 0;
    scan_result result_;
    std::set<std::string> semaphores_;
    std::map<std::string, lock_info> leases_;
    error_code failed_;
    bool finished_ = false;
};

}  // namespace

void start_scan(client& c, std::string root, scan_options opts, any_handler<void(error_code, scan_result)> handler)
{
    auto op = make_pooled<op_state<scan_result>>(std::move(handler), c.get_executor());
    if (auto problem = check_path(root); !problem.ok()) {
        op->complete(problem.ec, scan_result{});
        return;
    }
    std::make_shared<scan_state>(c, opts, std::move(op))->start(std::move(root));
}

}  // namespace zkcoro::detail
