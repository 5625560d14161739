// The simulator serves many keep-alive connections at once without making
// any of them wait for another, as vLLM's asyncio server does: a client at
// high concurrency must see the same server as one at low concurrency.
#include "test_sim_support.hpp"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <string>
#include <vector>

namespace diffeval::sim {
namespace {

using namespace testing;

constexpr int k_connections = 4096;

// A blocking loopback connection to `port` that gives up reading after 10 s,
// so a stalled server fails the test instead of hanging it.
int connect_to(int port) {
    int fd = ::socket(AF_INET, SOCK_STREAM, 0);
    timeval timeout{10, 0};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof timeout);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(static_cast<uint16_t>(port));
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
        ::close(fd);
        return -1;
    }
    return fd;
}

bool send_all(int fd, const std::string& bytes) {
    return ::send(fd, bytes.data(), bytes.size(), MSG_NOSIGNAL) ==
           static_cast<ssize_t>(bytes.size());
}

// The head of one response to GET /health (it has no body), or "" when
// the connection failed or timed out.
std::string read_head(int fd) {
    std::string got;
    char c = 0;
    while (got.size() < 4096 && ::recv(fd, &c, 1, 0) == 1) {
        got += c;
        if (got.ends_with("\r\n\r\n")) {
            return got;
        }
    }
    return "";
}

TEST(SimConnections, ThousandsOfKeepAliveConnectionsAreServedAtOnce) {
    rlimit lim{};
    getrlimit(RLIMIT_NOFILE, &lim);
    if (lim.rlim_max < 2 * k_connections + 64) {
        GTEST_SKIP() << "the descriptor limit (" << lim.rlim_max << ") cannot hold both ends of "
                     << k_connections << " connections";
    }
    lim.rlim_cur = lim.rlim_max;
    setrlimit(RLIMIT_NOFILE, &lim);
    auto server = start_server();
    ASSERT_NE(server, nullptr);

    // Every connection is open and idle at once; then each sends a request
    // in turn and is answered while all the others stay open.
    std::vector<int> fds;
    for (int i = 0; i < k_connections; ++i) {
        int fd = connect_to(server->port());
        ASSERT_GE(fd, 0) << "connection " << i << " refused";
        fds.push_back(fd);
    }
    const std::string request = "GET /health HTTP/1.1\r\nHost: sim\r\n\r\n";
    int answered = 0;
    for (int round = 0; round < 2; ++round) {
        for (int fd : fds) {
            ASSERT_TRUE(send_all(fd, request));
        }
        for (int fd : fds) {
            std::string head = read_head(fd);
            answered += head.starts_with("HTTP/1.1 200 ");
            EXPECT_EQ(head.find("Connection: close"), std::string::npos);
        }
    }
    EXPECT_EQ(answered, 2 * k_connections);
    EXPECT_EQ(server->stats().requests.at("health"), 2 * k_connections);
    for (int fd : fds) {
        ::close(fd);
    }
}

} // namespace
} // namespace diffeval::sim
