/* The device search: one source for CUDA (NVRTC) and OpenCL. The host prepends a prelude that defines
 * KERNEL, GLOBAL, RESTRICT, u32, u64 and ATOMIC_NEXT for the language it compiles for (see prelude.rs).
 *
 * Each thread takes seeds from a shared counter until none is left and searches each one depth first
 * from its level to its unit's tail, where the two last rows are settled by mask tests. The loop is
 * Batch::search in common/src/kernel/seeds.rs line for line: the same completions and the same nodes.
 *
 * seeds:  4 words per seed: c, l, r (the masks its level receives), unit << 5 | level
 * forbid: 32 words per unit: per level, the squares it may not use beyond the queens above
 * tails:  per unit, its third-to-last level
 * out:    2 words per seed: completions, nodes
 */

#define STACK 32

KERNEL nq_search(GLOBAL const u32 *RESTRICT seeds, u32 nseeds,
                      GLOBAL const u32 *RESTRICT forbid, GLOBAL const u32 *RESTRICT tails,
                      u32 full, GLOBAL u32 *next, GLOBAL u64 *out)
{
    u32 cs[STACK], ls[STACK], rs[STACK], fs[STACK];
    for (;;) {
        u32 i = ATOMIC_NEXT(next);
        if (i >= nseeds) {
            return;
        }
        GLOBAL const u32 *s = seeds + 4 * (u64)i;
        u32 unit = s[3] >> 5;
        int v0 = (int)(s[3] & 31u);
        GLOBAL const u32 *fb = forbid + 32 * (u64)unit;
        int tail = (int)tails[unit];
        u64 count = 0, nodes = 0;
        int v = v0;
        cs[v] = s[0];
        ls[v] = s[1];
        rs[v] = s[2];
        fs[v] = ~(s[0] | s[1] | s[2] | fb[v]) & full;
        for (;;) {
            u32 f = fs[v];
            if (f == 0u) {
                if (v == v0) {
                    break;
                }
                v -= 1;
                continue;
            }
            u32 bit = f & (0u - f);
            fs[v] = f ^ bit;
            u32 c = cs[v] | bit;
            u32 l = (ls[v] | bit) << 1;
            u32 r = (rs[v] | bit) >> 1;
            u32 nf = ~(c | l | r | fb[v + 1]) & full;
            nodes += 1;
            if (v == tail) {
                /* The last two rows: nf has at most two squares; each is a completion when the last
                 * row keeps a square once it is placed. */
                u32 g = ~(c | (l << 1) | (r >> 1) | fb[v + 2]) & full;
                u32 b1 = nf & (0u - nf);
                u32 b2 = nf ^ b1;
                u32 leaves = (u32)((b1 != 0u) & ((g & ~(b1 | (b1 << 1) | (b1 >> 1))) != 0u))
                           + (u32)((b2 != 0u) & ((g & ~(b2 | (b2 << 1) | (b2 >> 1))) != 0u));
                count += leaves;
                nodes += (u64)(POPCOUNT(nf) + leaves);
            } else if (nf != 0u) {
                v += 1;
                cs[v] = c;
                ls[v] = l;
                rs[v] = r;
                fs[v] = nf;
            }
        }
        out[2 * (u64)i] = count;
        out[2 * (u64)i + 1] = nodes;
    }
}
