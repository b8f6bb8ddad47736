// The records of live tasks' ids (zkcoro/this_task.hpp): compiled into the library
// (src/task_ids.cpp) and into the configure-time probe of the Asio hook (config/asio_hook_probe.cpp).
#include <zkcoro/this_task.hpp>

#include <climits>
#include <mutex>
#include <unordered_map>

namespace zkcoro::this_task::detail {
namespace {
struct task_record {
    owner_id id;
    void (*destroy)(const void*);
};

struct task_ids {
    std::mutex m;
    std::unordered_map<const void*, task_record> live;  // by end frame
    owner_id issued = 0;
};

task_ids& ids()
{
    // Never destroyed: a task may end while static objects are being destroyed.
    static task_ids* const all = new task_ids;
    return *all;
}

constexpr owner_id task_bit = owner_id(1) << (sizeof(owner_id) * CHAR_BIT - 1);
}  // namespace

owner_id known_task(const void* frame) noexcept
{
    auto& t = ids();
    std::lock_guard lock(t.m);
    const auto it = t.live.find(frame);
    return it == t.live.end() ? 0 : it->second.id;
}

owner_id new_task(const void* end_frame, void (*destroy)(const void*))
{
    auto& t = ids();
    std::lock_guard lock(t.m);
    const owner_id id = task_bit | ++t.issued;
    t.live.emplace(end_frame, task_record{id, destroy});
    return id;
}

void task_ended(const void* end_frame) noexcept
{
    void (*destroy)(const void*) = nullptr;
    {
        auto& t = ids();
        std::lock_guard lock(t.m);
        const auto it = t.live.find(end_frame);
        if (it == t.live.end())
            return;
        destroy = it->second.destroy;
        t.live.erase(it);
    }
    destroy(end_frame);
}

std::size_t live_tasks() noexcept
{
    auto& t = ids();
    std::lock_guard lock(t.m);
    return t.live.size();
}
}  // namespace zkcoro::this_task::detail
