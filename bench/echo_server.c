/* echo_server.c - the smallest MCP server over stdio that can be written,
 * for separating a client's cost from a server's: it answers every request
 * at once with a fixed reply, echoing only the request's id.
 *
 *   initialize  -> a minimal result
 *   tools/list  -> one tool, "echo"
 *   tools/call  -> "ok", or a text of N bytes when the arguments hold "bytes":N
 * Notifications get no reply. Lines up to 1 MiB. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void reply(const char *id, const char *result) {
    printf("{\"jsonrpc\":\"2.0\",\"id\":%s,\"result\":%s}\n", id, result);
    fflush(stdout);
}

int main(void) {
    static char line[1 << 20];
    char id[64];
    while (fgets(line, sizeof line, stdin)) {
        const char *p = strstr(line, "\"id\":");
        if (!p) continue; /* a notification */
        p += 5;
        size_t n = strcspn(p, ",}");
        if (n >= sizeof id) continue;
        memcpy(id, p, n);
        id[n] = 0;
        if (strstr(line, "\"method\":\"initialize\""))
            reply(id, "{\"protocolVersion\":\"2025-06-18\",\"capabilities\":{\"tools\":{}},"
                      "\"serverInfo\":{\"name\":\"c-echo\",\"version\":\"1\"}}");
        else if (strstr(line, "\"method\":\"tools/list\""))
            reply(id, "{\"tools\":[{\"name\":\"echo\",\"inputSchema\":{\"type\":\"object\"}}]}");
        else if (strstr(line, "\"method\":\"tools/call\"")) {
            const char *b = strstr(line, "\"bytes\":");
            long size = b ? atol(b + 8) : 0;
            if (size <= 0) {
                reply(id, "{\"content\":[{\"type\":\"text\",\"text\":\"ok\"}]}");
                continue;
            }
            printf("{\"jsonrpc\":\"2.0\",\"id\":%s,\"result\":{\"content\":[{\"type\":\"text\",\"text\":\"", id);
            static char chunk[65536];
            memset(chunk, 'x', sizeof chunk);
            for (long left = size; left > 0; left -= sizeof chunk)
                fwrite(chunk, 1, left < (long)sizeof chunk ? (size_t)left : sizeof chunk, stdout);
            printf("\"}]}}\n");
            fflush(stdout);
        }
        else if (strstr(line, "\"method\""))
            printf("{\"jsonrpc\":\"2.0\",\"id\":%s,\"error\":{\"code\":-32601,\"message\":\"no\"}}\n", id), fflush(stdout);
    }
    return 0;
}
