// The pure part of in-process deadlock detection (engine/wait_graph.hpp).
#include "engine/wait_graph.hpp"

#include <functional>

namespace zkcoro::detail {

void task_wait_graph::held(owner_id owner, lock_id lock)
{
    std::lock_guard lk(m_);
    ++holders_[lock][owner];
}

void task_wait_graph::released(owner_id owner, lock_id lock)
{
    std::lock_guard lk(m_);
    auto l = holders_.find(lock);
    if (l == holders_.end())
        return;
    auto o = l->second.find(owner);
    if (o != l->second.end() && --o->second <= 0)
        l->second.erase(o);
    if (l->second.empty())
        holders_.erase(l);
}

void task_wait_graph::waiting(owner_id owner, lock_id lock)
{
    std::lock_guard lk(m_);
    waits_[owner] = lock;
}

void task_wait_graph::stopped_waiting(owner_id owner)
{
    std::lock_guard lk(m_);
    waits_.erase(owner);
}

std::vector<owner_id> task_wait_graph::cycle_if_waiting(owner_id owner, lock_id lock) const
{
    std::lock_guard lk(m_);
    return cycle_locked(owner, lock);
}

std::vector<owner_id> task_wait_graph::wait_unless_cycle(owner_id owner, lock_id lock)
{
    std::lock_guard lk(m_);
    auto cycle = cycle_locked(owner, lock);
    if (cycle.empty())
        waits_[owner] = lock;
    return cycle;
}

std::vector<owner_id> task_wait_graph::cycle_locked(owner_id owner, lock_id lock) const
{
    std::set<owner_id> visited;
    std::vector<owner_id> path{owner};
    // Depth first over "waits for a lock held by": owner -> holders of lock -> the locks they
    // wait for -> their holders ...; a path back to owner is a cycle.
    std::function<bool(lock_id)> reaches = [&](lock_id l) {
        auto h = holders_.find(l);
        if (h == holders_.end())
            return false;
        for (const auto& [holder, count] : h->second) {
            if (holder == owner)
                return path.size() > 1;  // owner's own hold of the first lock is reentrancy
            if (!visited.insert(holder).second)
                continue;
            auto w = waits_.find(holder);
            if (w == waits_.end())
                continue;
            path.push_back(holder);
            if (reaches(w->second))
                return true;
            path.pop_back();
        }
        return false;
    };
    if (reaches(lock))
        return path;
    return {};
}

task_wait_graph& process_wait_graph()
{
    static task_wait_graph graph;  // never destroyed before a lock object that records into it
    return graph;
}

}  // namespace zkcoro::detail
