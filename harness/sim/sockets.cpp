// Descriptor scanning with getsockname/getpeername. A descriptor closed or
// reused while scanning is harmless: it either fails the checks or is
// another connection to the same server and port pair, which is what the
// caller asked for.
#include <harness/sim/sockets.hpp>

#include <arpa/inet.h>
#include <dirent.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>

namespace diffeval::sim {

namespace {

int port_of(const sockaddr_storage& addr) {
    if (addr.ss_family == AF_INET) {
        return ntohs(reinterpret_cast<const sockaddr_in&>(addr).sin_port);
    }
    if (addr.ss_family == AF_INET6) {
        return ntohs(reinterpret_cast<const sockaddr_in6&>(addr).sin6_port);
    }
    return -1;
}

bool matches(int fd, int local_port, int peer_port) {
    struct stat st {};
    if (fstat(fd, &st) != 0 || !S_ISSOCK(st.st_mode)) {
        return false;
    }
    sockaddr_storage local{};
    socklen_t len = sizeof local;
    if (getsockname(fd, reinterpret_cast<sockaddr*>(&local), &len) != 0 ||
        port_of(local) != local_port) {
        return false;
    }
    sockaddr_storage peer{};
    len = sizeof peer;
    if (getpeername(fd, reinterpret_cast<sockaddr*>(&peer), &len) != 0) {
        return false; // the listening socket, or not connected
    }
    return peer_port < 0 || port_of(peer) == peer_port;
}

} // namespace

std::vector<int> connection_sockets(int local_port, int peer_port) {
    std::vector<int> out;
    DIR* dir = opendir("/proc/self/fd");
    if (!dir) {
        return out;
    }
    int dir_fd = dirfd(dir);
    while (dirent* e = readdir(dir)) {
        char* end = nullptr;
        long fd = std::strtol(e->d_name, &end, 10);
        if (end == e->d_name || *end != '\0' || fd == dir_fd) {
            continue;
        }
        if (matches(static_cast<int>(fd), local_port, peer_port)) {
            out.push_back(static_cast<int>(fd));
        }
    }
    closedir(dir);
    return out;
}

void end_connection(int fd, Ending how) {
    if (how == Ending::reset) {
        linger lg{1, 0}; // close() then sends a reset instead of a graceful end
        setsockopt(fd, SOL_SOCKET, SO_LINGER, &lg, sizeof lg);
    }
    shutdown(fd, SHUT_RDWR);
}

} // namespace diffeval::sim
