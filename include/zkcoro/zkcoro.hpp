// Umbrella header: everything public in zkcoro.
#ifndef ZKCORO_ZKCORO_HPP
#define ZKCORO_ZKCORO_HPP

#include <zkcoro/basic_mutex.hpp>
#include <zkcoro/client.hpp>
#include <zkcoro/client_config.hpp>
#include <zkcoro/error.hpp>
#include <zkcoro/guard.hpp>
#include <zkcoro/holder_data.hpp>
#include <zkcoro/leader_latch.hpp>
#include <zkcoro/leader_selector.hpp>
#include <zkcoro/lock_options.hpp>
#include <zkcoro/metrics.hpp>
#include <zkcoro/multi_lock.hpp>
#include <zkcoro/mutex.hpp>
#include <zkcoro/path.hpp>
#include <zkcoro/prometheus.hpp>
#include <zkcoro/queue_order.hpp>
#include <zkcoro/revocation.hpp>
#include <zkcoro/scan.hpp>
#include <zkcoro/semaphore.hpp>
#include <zkcoro/shared_mutex.hpp>
#include <zkcoro/types.hpp>
#include <zkcoro/this_task.hpp>
#include <zkcoro/watch.hpp>

#endif
