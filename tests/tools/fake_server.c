/*
 * fake_server.c - a wrong server for the CLI tests (tests/cli/): the fake
 * node of support/fake_node.h as a program of its own.
 *
 *   sluice_fake_server PORT REPLY
 *
 * Listens on 127.0.0.1:PORT until killed. Answers SCRIPT LOAD with the
 * script's SHA1 (the library's own, as a server would compute it), AUTH,
 * SELECT and PING with +OK, SUBSCRIBE as a server does, and every other
 * command (EVALSHA...) with REPLY: raw RESP with C escapes (\r, \n, \\,
 * \xNN), such as '*1\r\n:5\r\n', a reply no server sends.
 */
#include "fake_cluster.h" /* fc_script_sha() */
#include "fake_node.h"

#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static char reply[4096];
static size_t reply_len;

/* Unescapes 'in' into reply[]; -1 on an escape it does not know. */
static int unescape(const char *in)
{
    size_t n = 0;

    for (const char *p = in; *p != '\0' && n < sizeof(reply); p++) {
        if (*p != '\\') {
            reply[n++] = *p;
            continue;
        }
        switch (*++p) {
        case 'r': reply[n++] = '\r'; break;
        case 'n': reply[n++] = '\n'; break;
        case '\\': reply[n++] = '\\'; break;
        case 'x': {
            char hex[3] = {p[1], p[1] != '\0' ? p[2] : '\0', '\0'};
            char *end;
            long v = strtol(hex, &end, 16);

            if (end != hex + 2)
                return -1;
            reply[n++] = (char)v;
            p += 2;
            break;
        }
        default:
            return -1;
        }
    }
    reply_len = n;
    return n < sizeof(reply) ? 0 : -1;
}

static int answer(fake_conn *c, const fake_cmd *cmd, void *payload)
{
    (void)payload;
    if (fake_cmd_is(cmd, "SCRIPT LOAD") && cmd->argc == 3)
        fake_replyf(c, "$40\r\n%s\r\n", fc_script_sha(cmd->argv[2], cmd->lens[2]));
    else if (fake_cmd_is(cmd, "AUTH") || fake_cmd_is(cmd, "SELECT") ||
             fake_cmd_is(cmd, "PING"))
        fake_replyf(c, "+OK\r\n");
    else if (fake_cmd_is(cmd, "SUBSCRIBE") && cmd->argc == 2)
        fake_replyf(c, "*3\r\n$9\r\nsubscribe\r\n$%zu\r\n%.*s\r\n:1\r\n",
                    cmd->lens[1], (int)cmd->lens[1], cmd->argv[1]);
    else
        fake_reply(c, reply, reply_len);
    return 1;
}

int main(int argc, char **argv)
{
    char *end;
    long port;
    sigset_t set;
    int sig;
    fake_node *n;

    if (argc != 3) {
        fprintf(stderr, "usage: sluice_fake_server PORT REPLY\n");
        return 2;
    }
    port = strtol(argv[1], &end, 10);
    if (*end != '\0' || port < 1 || port > 65535 || unescape(argv[2]) < 0) {
        fprintf(stderr, "sluice_fake_server: bad PORT or REPLY\n");
        return 2;
    }
    /* The nodes' threads inherit the mask: only this thread takes them. */
    sigemptyset(&set);
    sigaddset(&set, SIGTERM);
    sigaddset(&set, SIGINT);
    pthread_sigmask(SIG_BLOCK, &set, NULL);
    n = fake_node_start((int)port, answer, NULL);
    if (n == NULL) {
        fprintf(stderr, "sluice_fake_server: cannot listen on port %ld\n",
                port);
        return 1;
    }
    sigwait(&set, &sig);
    fake_node_stop(n);
    return 0;
}
