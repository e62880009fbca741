/* http_rtt.c PORT PATH N - the keep-alive floor for an MCP call over HTTP:
 * one connection, reused for every request, and nothing done with a reply
 * but reading it to its end. It opens a session (initialize, taking the
 * Mcp-Session-Id, then notifications/initialized), then times N tools/call
 * "echo" POSTs to 127.0.0.1:PORT/PATH and prints the median, p25 and p75
 * in microseconds. Replies may be JSON (Content-Length) or SSE (chunked). */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

static int fd;
static char session[256];

static double now_us(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1e6 + t.tv_nsec / 1e3;
}

static void post(const char *path, int port, const char *body) {
    char req[4096];
    char sid[300] = "";
    if (session[0]) snprintf(sid, sizeof sid, "Mcp-Session-Id: %s\r\n", session);
    int n = snprintf(req, sizeof req,
                     "POST %s HTTP/1.1\r\nHost: 127.0.0.1:%d\r\nContent-Type: application/json\r\n"
                     "Accept: application/json, text/event-stream\r\nMCP-Protocol-Version: 2025-06-18\r\n%s"
                     "Content-Length: %zu\r\n\r\n%s",
                     path, port, sid, strlen(body), body);
    if (write(fd, req, (size_t)n) != n) exit(1);
}

/* Reads one response to its end: Content-Length bytes, or chunks up to the
 * last one. Remembers an Mcp-Session-Id. */
static void read_response(void) {
    static char buf[1 << 20];
    size_t len = 0;
    char *body = NULL;
    for (;;) {
        ssize_t r = read(fd, buf + len, sizeof buf - 1 - len);
        if (r <= 0) exit(1);
        len += (size_t)r;
        buf[len] = 0;
        if (!body) {
            char *end = strstr(buf, "\r\n\r\n");
            if (!end) continue;
            body = end + 4;
            char *sid = strcasestr(buf, "\r\nmcp-session-id: ");
            if (sid && sid < end) {
                sid += 18;
                size_t n = strcspn(sid, "\r");
                if (n < sizeof session) memcpy(session, sid, n), session[n] = 0;
            }
        }
        char *end = strstr(buf, "\r\n\r\n");
        char *cl = strcasestr(buf, "\r\ncontent-length:");
        if (cl && cl < end) {
            if ((size_t)(buf + len - body) >= strtoul(cl + 17, NULL, 10)) return;
        } else if (len >= 5 && (strcmp(buf + len - 5, "0\r\n\r\n") == 0)) {
            return;
        }
    }
}

static int cmp(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

int main(int argc, char **argv) {
    if (argc < 4) {
        fprintf(stderr, "usage: http_rtt PORT PATH N\n");
        return 2;
    }
    int port = atoi(argv[1]), n = atoi(argv[3]), one = 1;
    const char *path = argv[2];
    fd = socket(AF_INET, SOCK_STREAM, 0);
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    struct sockaddr_in addr = {.sin_family = AF_INET, .sin_port = htons(port)};
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (connect(fd, (struct sockaddr *)&addr, sizeof addr)) {
        perror("http_rtt");
        return 1;
    }
    post(path, port,
         "{\"jsonrpc\":\"2.0\",\"id\":0,\"method\":\"initialize\",\"params\":{\"protocolVersion\":\"2025-06-18\","
         "\"capabilities\":{},\"clientInfo\":{\"name\":\"http_rtt\",\"version\":\"1\"}}}");
    read_response();
    post(path, port, "{\"jsonrpc\":\"2.0\",\"method\":\"notifications/initialized\"}");
    read_response();
    double *xs = malloc(sizeof(double) * (size_t)n);
    char body[256];
    for (int i = 0; i < n + 200; i++) { /* the first 200 warm the server */
        snprintf(body, sizeof body,
                 "{\"jsonrpc\":\"2.0\",\"id\":%d,\"method\":\"tools/call\",\"params\":{\"name\":\"echo\","
                 "\"arguments\":{\"message\":\"hi\"}}}",
                 i + 1);
        double t0 = now_us();
        post(path, port, body);
        read_response();
        if (i >= 200) xs[i - 200] = now_us() - t0;
    }
    qsort(xs, (size_t)n, sizeof(double), cmp);
    printf("%.2f %.2f %.2f\n", xs[n / 2], xs[n / 4], xs[(3 * n) / 4]);
    return 0;
}
