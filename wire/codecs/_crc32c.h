/*
 * CRC32C (Castagnoli), as BookKeeper's digests, entry logs and journal use it:
 * the CPU's instruction where it has one (SSE4.2), else slicing by eight over
 * tables.  Shared by the C twins that checksum (_fastcodec.c: the client's
 * digests; _records.c: the bookie's disk records); each module has its own
 * tables and its own choice (bk_crc_init at import, hardware_crc32c for tests).
 */
#ifndef BKCTL_CRC32C_H
#define BKCTL_CRC32C_H

#include <Python.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

static uint32_t crc_table[8][256];

static void crc_init_tables(void)
{
    for (uint32_t i = 0; i < 256; i++) {
        uint32_t c = i;
        for (int k = 0; k < 8; k++)
            c = (c & 1) ? (c >> 1) ^ 0x82F63B78u : c >> 1;
        crc_table[0][i] = c;
    }
    for (uint32_t i = 0; i < 256; i++)
        for (int t = 1; t < 8; t++)
            crc_table[t][i] = (crc_table[t - 1][i] >> 8) ^ crc_table[0][crc_table[t - 1][i] & 0xFF];
}

/* crc is the running register (already inverted); slicing by eight */
static uint32_t crc_soft(uint32_t crc, const unsigned char *p, size_t n)
{
    while (n >= 8) {
        uint32_t lo = crc ^ ((uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24);
        uint32_t hi = (uint32_t)p[4] | (uint32_t)p[5] << 8 | (uint32_t)p[6] << 16 | (uint32_t)p[7] << 24;
        crc = crc_table[7][lo & 0xFF] ^ crc_table[6][(lo >> 8) & 0xFF] ^ crc_table[5][(lo >> 16) & 0xFF]
            ^ crc_table[4][lo >> 24] ^ crc_table[3][hi & 0xFF] ^ crc_table[2][(hi >> 8) & 0xFF]
            ^ crc_table[1][(hi >> 16) & 0xFF] ^ crc_table[0][hi >> 24];
        p += 8;
        n -= 8;
    }
    while (n--)
        crc = (crc >> 8) ^ crc_table[0][(crc ^ *p++) & 0xFF];
    return crc;
}

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define HAVE_HW_CRC 1
__attribute__((target("sse4.2"))) static uint32_t crc_hw(uint32_t crc, const unsigned char *p, size_t n)
{
    uint64_t c = crc;
    while (n >= 8) {
        uint64_t v;
        memcpy(&v, p, 8);
        c = __builtin_ia32_crc32di(c, v);
        p += 8;
        n -= 8;
    }
    uint32_t c32 = (uint32_t)c;
    while (n--)
        c32 = __builtin_ia32_crc32qi(c32, *p++);
    return c32;
}
#endif

static int use_hw_crc = 0;

/* CRC32C of a then b, as crc32c(b, crc32c(a)) */
static uint32_t crc32c_two(const unsigned char *a, size_t na, const unsigned char *b, size_t nb)
{
    uint32_t crc = 0xFFFFFFFFu;
#ifdef HAVE_HW_CRC
    if (use_hw_crc) {
        crc = crc_hw(crc, a, na);
        crc = crc_hw(crc, b, nb);
        return crc ^ 0xFFFFFFFFu;
    }
#endif
    crc = crc_soft(crc, a, na);
    crc = crc_soft(crc, b, nb);
    return crc ^ 0xFFFFFFFFu;
}
/* The tables, and the instruction where the CPU has it: once, at the module's import. */
static void bk_crc_init(void)
{
    crc_init_tables();
#ifdef HAVE_HW_CRC
    __builtin_cpu_init();
    use_hw_crc = __builtin_cpu_supports("sse4.2") ? 1 : 0;
#endif
}

PyDoc_STRVAR(hardware_crc32c_doc,
"hardware_crc32c(on) -> bool\n\n"
"For tests: compute CRC32C with the CPU's instruction (on, where it has one)\n"
"or the table; returns whether the instruction is used now.");

static PyObject *hardware_crc32c(PyObject *self, PyObject *on)
{
    int want = PyObject_IsTrue(on);
    if (want < 0)
        return NULL;
    use_hw_crc = 0;
#ifdef HAVE_HW_CRC
    if (want && __builtin_cpu_supports("sse4.2"))
        use_hw_crc = 1;
#endif
    return PyBool_FromLong(use_hw_crc);
}

#endif
