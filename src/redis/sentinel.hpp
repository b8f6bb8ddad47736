// Redis Sentinel (internal): finding the master of a redis+sentinel:// URL, and following its
// failovers (+switch-master on a sentinel's pub/sub).
#ifndef ZKCORO_SRC_REDIS_SENTINEL_HPP
#define ZKCORO_SRC_REDIS_SENTINEL_HPP

#include "redis/link.hpp"

#include <functional>
#include <memory>
#include <string>

namespace zkcoro::detail {

// Asks the sentinels of `url`, in order, SENTINEL get-master-addr-by-name; calls `done` on the
// strand with the first address one gives, else no_sentinel (none answered: the text names each
// and why) or unknown_master (those that answered know no such master). Each sentinel gets
// min(connect_timeout, 2 s).
void discover_master(const redis_strand& strand, const redis_url& url, const redis_options& opts,
                     redis_link::hooks::resolved done);

// Link hooks for a link to the master of a redis+sentinel:// URL: `resolve` asks the sentinels;
// a first connection that reached a replica or a dead old master is tried again, 6 times at most.
// Each link keeps its own order of the sentinels: after an address that could not be reached or
// was not a master, the next attempt starts with the sentinel after the one that named it; a
// sentinel whose master answered (ROLE master) moves to the front (a debug log line says so).
// Call it after setting h.ready (it wraps it).
void set_sentinel_hooks(redis_link::hooks& h, const redis_strand& strand, const redis_url& url,
                        const redis_options& opts);

// A subscribe-mode link to one sentinel after another (the next one after each drop), subscribed
// to +switch-master: `on_switch` runs on the strand when the sentinels announce a new master of
// url.master_name. Close it with close().
std::shared_ptr<redis_link> watch_failovers(const redis_strand& strand, const redis_url& url,
                                            const redis_options& opts, std::function<void(std::string)> on_switch);

}  // namespace zkcoro::detail

#endif
