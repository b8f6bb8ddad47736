// An unordered_map that keeps the node of its last erased entry for its next insertion
// (internal): who holds a lock changes every cycle, and then costs no allocation. Pure.
#ifndef ZKCORO_SRC_ENGINE_RECYCLING_MAP_HPP
#define ZKCORO_SRC_ENGINE_RECYCLING_MAP_HPP

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
    iterator end() noexcept { return map_.end(); }
    const_iterator end() const noexcept { return map_.end(); }
    std::size_t size() const noexcept { return map_.size(); }
    bool empty() const noexcept { return map_.empty(); }

    // The value at `k`, inserted (default) when absent: in the spare node when there is one.
    V& operator[](const K& k)
    {
        if (auto it = map_.find(k); it != map_.end())
            return it->second;
        if (spare_.empty())
            return map_[k];
        spare_.key() = k;
        spare_.mapped() = V{};
        return map_.insert(std::move(spare_)).position->second;
    }

    void erase(iterator it)
    {
        spare_ = map_.extract(it);
        spare_.mapped() = V{};  // the value goes now (a lease it held is released)
    }
    std::size_t erase(const K& k)
    {
        auto it = map_.find(k);
        if (it == map_.end())
            return 0;
        erase(it);
        return 1;
    }

private:
    map_type map_;
    typename map_type::node_type spare_;
};

}  // namespace zkcoro::detail

#endif
