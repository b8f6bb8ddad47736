// An unordered_map that keeps the node of its last erased entry for its next insertion
// (internal): what changes every lock cycle (who holds a lock, the watches on its path) then
// costs no allocation. An erased entry's value is reset at once: cleared where it can be (a
// vector keeps its capacity), else replaced by a default one (a lease it held is released). Pure.
#ifndef ZKCORO_SRC_ASYNC_RECYCLING_MAP_HPP
#define ZKCORO_SRC_ASYNC_RECYCLING_MAP_HPP

#include <cstddef>
#include <unordered_map>
#include <utility>

namespace zkcoro::detail {

template <class K, class V>
class recycling_map {
public:
    using map_type = std::unordered_map<K, V>;
    using iterator = typename map_type::iterator;
    using const_iterator = typename map_type::const_iterator;

    iterator find(const K& k) { return map_.find(k); }
    const_iterator find(const K& k) const { return map_.find(k); }
    iterator begin() noexcept { return map_.begin(); }
    iterator end() noexcept { return map_.end(); }
    const_iterator end() const noexcept { return map_.end(); }
    std::size_t size() const noexcept { return map_.size(); }
    bool empty() const noexcept { return map_.empty(); }
    void clear() noexcept { map_.clear(); }

    // The value at `k`, inserted (default, or reset) when absent: in the spare node when there is one.
    V& operator[](const K& k)
    {
        if (auto it = map_.find(k); it != map_.end())
            return it->second;
        if (spare_.empty())
            return map_[k];
        spare_.key() = k;
        return map_.insert(std::move(spare_)).position->second;
    }

    void erase(iterator it)
    {
        take(it, [](V&) {});
    }
    std::size_t erase(const K& k)
    {
        auto it = map_.find(k);
        if (it == map_.end())
            return 0;
        erase(it);
        return 1;
    }

    // Takes the entry at `it` out of the map, then calls `f` with its value (so that `f` may
    // insert into the map again), then keeps the node, its value reset, for the next insertion.
    template <class F>
    void take(iterator it, F&& f)
    {
        auto node = map_.extract(it);
        std::forward<F>(f)(node.mapped());
        if constexpr (requires(V& v) { v.clear(); })
            node.mapped().clear();
        else
            node.mapped() = V{};
        spare_ = std::move(node);
    }

private:
    map_type map_;
    typename map_type::node_type spare_;
};

}  // namespace zkcoro::detail

#endif
