/*
 * text.c - how the tool writes bytes it did not choose (names, payloads,
 * what a library or a server said): safe for a terminal, or as JSON.
 */
#include "cli.h"

#include <stdlib.h>

/* ---- UTF-8 ----------------------------------------------------------------- */

/*
 * The length of the valid UTF-8 sequence at 's' (at most 'len' bytes), or 0
 * if it is not one. Overlong forms, surrogates and code points above
 * U+10FFFF are not valid (RFC 3629).
 */
static size_t utf8_length(const unsigned char *s, size_t len)
{
    unsigned char c = s[0];
    size_t n;
    unsigned char lo = 0x80, hi = 0xBF; /* bounds of the second byte */

    if (c >= 0xC2 && c <= 0xDF)
        n = 2;
    else if (c >= 0xE0 && c <= 0xEF)
        n = 3;
    else if (c >= 0xF0 && c <= 0xF4)
        n = 4;
    else
        return 0;
    if (c == 0xE0)
        lo = 0xA0;
    else if (c == 0xED)
        hi = 0x9F;
    else if (c == 0xF0)
        lo = 0x90;
    else if (c == 0xF4)
        hi = 0x8F;
    if (len < n || s[1] < lo || s[1] > hi)
        return 0;
    for (size_t i = 2; i < n; i++)
        if (s[i] < 0x80 || s[i] > 0xBF)
            return 0;
    return n;
}

bool cli_utf8_valid(const char *s, size_t len)
{
    const unsigned char *p = (const unsigned char *)s;
    size_t i = 0, n;

    while (i < len) {
        if (p[i] < 0x80)
            i++;
        else if ((n = utf8_length(p + i, len - i)) > 0)
            i += n;
        else
            return false;
    }
    return true;
}

/* ---- For a terminal -------------------------------------------------------- */

void cli_put_safe(FILE *f, const char *s, size_t len, bool space)
{
    const unsigned char *p = (const unsigned char *)s;
    size_t i = 0;

    while (i < len) {
        unsigned char c = p[i];
        size_t n = 1;

        if (c < 0x20 || c == 0x7F || (space && c == ' ') ||
            (c >= 0x80 && (n = utf8_length(p + i, len - i)) == 0)) {
            fprintf(f, "\\x%02x", c);
            n = 1;
        } else {
            fwrite(p + i, 1, n, f);
        }
        i += n;
    }
}

char *cli_safe_dup(const char *s, size_t len, bool space)
{
    char *text = NULL;
    size_t size = 0;
    FILE *f = open_memstream(&text, &size);

    if (f == NULL)
        return NULL;
    cli_put_safe(f, s, len, space);
    if (fclose(f) != 0) {
        free(text);
        return NULL;
    }
    return text;
}

/* ---- JSON ------------------------------------------------------------------ */

void cli_json_string(FILE *f, const char *s, size_t len)
{
    const unsigned char *p = (const unsigned char *)s;
    size_t i = 0;

    fputc('"', f);
    while (i < len) {
        unsigned char c = p[i];
        size_t n;

        if (c == '"' || c == '\\') {
            fputc('\\', f);
            fputc(c, f);
            i++;
        } else if (c < 0x20 || c == 0x7F) {
            switch (c) {
            case '\b': fputs("\\b", f); break;
            case '\f': fputs("\\f", f); break;
            case '\n': fputs("\\n", f); break;
            case '\r': fputs("\\r", f); break;
            case '\t': fputs("\\t", f); break;
            default: fprintf(f, "\\u%04x", c); break;
            }
            i++;
        } else if (c < 0x80) {
            fputc(c, f);
            i++;
        } else if ((n = utf8_length(p + i, len - i)) > 0) {
            fwrite(p + i, 1, n, f);
            i += n;
        } else {
            fputs("\\ufffd", f);
            i++;
        }
    }
    fputc('"', f);
}

/* ---- Base64 ---------------------------------------------------------------- */

void cli_base64(FILE *f, const void *data, size_t len)
{
    static const char digits[] =
        "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    const unsigned char *p = data;

    for (size_t i = 0; i < len; i += 3) {
        size_t left = len - i;
        uint32_t group = (uint32_t)p[i] << 16;
        char out[4];

        if (left > 1)
            group |= (uint32_t)p[i + 1] << 8;
        if (left > 2)
            group |= p[i + 2];
        out[0] = digits[group >> 18];
        out[1] = digits[(group >> 12) & 63];
        out[2] = left > 1 ? digits[(group >> 6) & 63] : '=';
        out[3] = left > 2 ? digits[group & 63] : '=';
        fwrite(out, 1, 4, f);
    }
}

/* ---- Decisions in JSON ------------------------------------------------------ */

const char *cli_fallback_name(const sluice_decision *d)
{
    switch (d->fallback) {
    case SLUICE_FELL_OPEN:
        return "open";
    case SLUICE_FELL_CLOSED:
        return "closed";
    default:
        return NULL;
    }
}

void cli_json_decision(FILE *f, const sluice_decision *d, bool counted)
{
    const char *fallback = cli_fallback_name(d);

    fprintf(f, "\"allowed\":%s,\"limit\":%llu,\"remaining\":%llu,"
            "\"retry_after_ms\":%llu,\"reset_after_ms\":%llu,\"counted\":%s",
            d->allowed ? "true" : "false", (unsigned long long)d->limit,
            (unsigned long long)d->remaining,
            (unsigned long long)d->retry_after_ms,
            (unsigned long long)d->reset_after_ms,
            counted ? "true" : "false");
    if (fallback != NULL)
        fprintf(f, ",\"fallback\":\"%s\"", fallback);
}

void cli_json_limit(FILE *f, const sluice_limit *l)
{
    fprintf(f, "\"algo\":\"%s\",\"max\":%llu,\"window_ms\":%llu,"
            "\"burst\":%llu", sluice_algo_name(l->algo),
            (unsigned long long)l->max, (unsigned long long)l->window_ms,
            (unsigned long long)l->burst);
}
