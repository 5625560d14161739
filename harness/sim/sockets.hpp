// Finding and closing the server's accepted TCP connections from outside
// cpp-httplib.
//
// cpp-httplib 0.11 gives handlers no access to their socket, and its
// keep-alive loop only notices a stopped server after the keep-alive timeout
// (seconds). To abort one connection (the reset fault) or end idle ones at
// once on stop(), the simulator finds the sockets among this process's open
// descriptors by their local and peer ports (Linux: /proc/self/fd).
#pragma once

#include <vector>

namespace diffeval::sim {

// Connected TCP sockets of this process whose local port is `local_port`
// and, when `peer_port` >= 0, whose peer port is `peer_port`.
std::vector<int> connection_sockets(int local_port, int peer_port);

// How end_connection ends a connection.
enum class Ending {
    graceful, // the peer reads end-of-file
    reset,    // the peer sees a reset once the server closes the descriptor
};

// End the connection on socket `fd`: no more bytes are sent and pending
// reads and writes on it fail, so the thread serving it moves on.
void end_connection(int fd, Ending how);

} // namespace diffeval::sim
