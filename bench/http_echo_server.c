/* http_echo_server.c PORT - the smallest Streamable HTTP MCP server that
 * keeps its connections, for separating an HTTP client's cost from a
 * server's: one thread, poll(), HTTP/1.1 keep-alive, every POST answered
 * at once with a JSON body that echoes only the request's id.
 *
 *   initialize  -> a minimal result and an Mcp-Session-Id
 *   tools/list  -> one tool, "echo"
 *   tools/call  -> "ok"
 *   a notification -> 202; GET -> 405 (no server stream); DELETE -> 200
 *
 * Prints "listening on PORT" when ready. With CONNECTION_LOG set, appends a
 * line to that file for every connection accepted. Requests up to 64 KiB. */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#define MAX_CONNS 64
#define BUF (64 * 1024)

struct conn {
    int fd;
    size_t len;
    char buf[BUF];
};

static struct conn conns[MAX_CONNS];

static void send_all(int fd, const char *p, size_t n) {
    while (n > 0) {
        ssize_t w = write(fd, p, n);
        if (w <= 0) return;
        p += w;
        n -= (size_t)w;
    }
}

static void respond(int fd, const char *status, const char *extra, const char *body) {
    char out[4096];
    int n = snprintf(out, sizeof out, "HTTP/1.1 %s\r\nContent-Type: application/json\r\n%sContent-Length: %zu\r\n\r\n%s",
                     status, extra, strlen(body), body);
    send_all(fd, out, (size_t)n);
}

/* The id's JSON text, copied into id; 0 when the message has none. */
static int find_id(const char *body, char *id, size_t cap) {
    const char *p = strstr(body, "\"id\":");
    if (!p) return 0;
    p += 5;
    size_t n = strcspn(p, ",}");
    if (n >= cap) return 0;
    memcpy(id, p, n);
    id[n] = 0;
    return 1;
}

static void handle(int fd, const char *head, const char *body) {
    char id[64], reply[1024];
    if (strncmp(head, "GET ", 4) == 0) return respond(fd, "405 Method Not Allowed", "", "");
    if (strncmp(head, "DELETE ", 7) == 0) return respond(fd, "200 OK", "", "");
    if (!find_id(body, id, sizeof id) || !strstr(body, "\"method\":")) return respond(fd, "202 Accepted", "", "");
    const char *result = "{\"content\":[{\"type\":\"text\",\"text\":\"ok\"}]}";
    const char *extra = "";
    if (strstr(body, "\"method\":\"initialize\"")) {
        result = "{\"protocolVersion\":\"2025-06-18\",\"capabilities\":{\"tools\":{}},"
                 "\"serverInfo\":{\"name\":\"http-echo\",\"version\":\"1\"}}";
        extra = "Mcp-Session-Id: bench\r\n";
    } else if (strstr(body, "\"method\":\"tools/list\"")) {
        result = "{\"tools\":[{\"name\":\"echo\",\"inputSchema\":{\"type\":\"object\"}}]}";
    }
    snprintf(reply, sizeof reply, "{\"jsonrpc\":\"2.0\",\"id\":%s,\"result\":%s}", id, result);
    respond(fd, "200 OK", extra, reply);
}

/* Handles every whole request in c's buffer; 0 when the connection is to close. */
static int serve(struct conn *c) {
    for (;;) {
        c->buf[c->len] = 0;
        char *end = strstr(c->buf, "\r\n\r\n");
        if (!end) return c->len < BUF - 1;
        size_t head_len = (size_t)(end - c->buf) + 4;
        size_t body_len = 0;
        char *cl = strcasestr(c->buf, "\r\ncontent-length:");
        if (cl && cl < end) body_len = strtoul(cl + 17, NULL, 10);
        if (head_len + body_len > BUF - 1) return 0;
        if (c->len < head_len + body_len) return 1;
        char saved = c->buf[head_len + body_len];
        c->buf[head_len + body_len] = 0;
        handle(c->fd, c->buf, c->buf + head_len);
        c->buf[head_len + body_len] = saved;
        memmove(c->buf, c->buf + head_len + body_len, c->len - head_len - body_len);
        c->len -= head_len + body_len;
    }
}

int main(int argc, char **argv) {
    int port = argc > 1 ? atoi(argv[1]) : 0;
    const char *log = getenv("CONNECTION_LOG");
    int ls = socket(AF_INET, SOCK_STREAM, 0), one = 1;
    setsockopt(ls, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    struct sockaddr_in addr = {.sin_family = AF_INET, .sin_port = htons(port)};
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (bind(ls, (struct sockaddr *)&addr, sizeof addr) || listen(ls, 64)) {
        perror("http_echo_server");
        return 1;
    }
    socklen_t alen = sizeof addr;
    getsockname(ls, (struct sockaddr *)&addr, &alen);
    printf("listening on %d\n", ntohs(addr.sin_port));
    fflush(stdout);
    for (int i = 0; i < MAX_CONNS; i++) conns[i].fd = -1;
    for (;;) {
        struct pollfd fds[MAX_CONNS + 1];
        int map[MAX_CONNS + 1], n = 0;
        fds[n] = (struct pollfd){.fd = ls, .events = POLLIN};
        map[n++] = -1;
        for (int i = 0; i < MAX_CONNS; i++)
            if (conns[i].fd >= 0) {
                fds[n] = (struct pollfd){.fd = conns[i].fd, .events = POLLIN};
                map[n++] = i;
            }
        if (poll(fds, (nfds_t)n, -1) < 0) continue;
        for (int k = 0; k < n; k++) {
            if (!fds[k].revents) continue;
            if (map[k] < 0) {
                int fd = accept(ls, NULL, NULL);
                if (fd < 0) continue;
                setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
                int slot = -1;
                for (int i = 0; i < MAX_CONNS && slot < 0; i++)
                    if (conns[i].fd < 0) slot = i;
                if (slot < 0) {
                    close(fd);
                    continue;
                }
                conns[slot].fd = fd;
                conns[slot].len = 0;
                if (log) {
                    FILE *f = fopen(log, "a");
                    if (f) {
                        fputs("connection\n", f);
                        fclose(f);
                    }
                }
                continue;
            }
            struct conn *c = &conns[map[k]];
            ssize_t r = read(c->fd, c->buf + c->len, BUF - 1 - c->len);
            if (r <= 0 || (c->len += (size_t)r, !serve(c))) {
                close(c->fd);
                c->fd = -1;
            }
        }
    }
}
