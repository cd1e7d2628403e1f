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

/* The instruction takes three cycles to give its result and can start one a cycle: a single
 * running register uses a third of it.  crc_hw runs three registers over three lanes of
 * CRC_LANE bytes each and joins them with crc_past_lane, the register moved past CRC_LANE zero
 * bytes (linear: four tables of a byte each).  A 4 KiB entry's CRC cost about a third as much. */
#define CRC_LANE 256
static uint32_t crc_lane_table[4][256];

/* after crc_init_tables: crc_soft over zeros moves a register and adds nothing */
static void crc_init_lane_table(void)
{
    static const unsigned char zeros[CRC_LANE];
    for (int k = 0; k < 4; k++)
        for (uint32_t b = 0; b < 256; b++)
            crc_lane_table[k][b] = crc_soft(b << (8 * k), zeros, CRC_LANE);
}

static inline uint32_t crc_past_lane(uint32_t c)
{
    return crc_lane_table[0][c & 0xFF] ^ crc_lane_table[1][(c >> 8) & 0xFF] ^ crc_lane_table[2][(c >> 16) & 0xFF]
        ^ crc_lane_table[3][c >> 24];
}

__attribute__((target("sse4.2"))) static uint32_t crc_hw(uint32_t crc, const unsigned char *p, size_t n)
{
    uint64_t c = crc;
    while (n >= 3 * CRC_LANE) {
        uint64_t c1 = 0, c2 = 0;
        const unsigned char *end = p + CRC_LANE;
        do {
            uint64_t v0, v1, v2;
            memcpy(&v0, p, 8);
            memcpy(&v1, p + CRC_LANE, 8);
            memcpy(&v2, p + 2 * CRC_LANE, 8);
            c = __builtin_ia32_crc32di(c, v0);
            c1 = __builtin_ia32_crc32di(c1, v1);
            c2 = __builtin_ia32_crc32di(c2, v2);
            p += 8;
        } while (p < end);
        c = crc_past_lane((uint32_t)c) ^ (uint32_t)c1;
        c = crc_past_lane((uint32_t)c) ^ (uint32_t)c2;
        p += 2 * CRC_LANE;
        n -= 3 * CRC_LANE;
    }
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
    crc_init_lane_table();
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
