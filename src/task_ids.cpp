// The ids of live tasks: include/zkcoro/detail/task_ids.ipp (shared with the Asio hook probe).
#include <zkcoro/detail/task_ids.ipp>
