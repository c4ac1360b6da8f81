/* The device search: one source for CUDA (NVRTC) and OpenCL. The host prepends a prelude that defines
 * KERNEL, GLOBAL, RESTRICT, u32, u64, ATOMIC_NEXT, POPCOUNT, LOCAL_ID and LOCAL_SIZE for the language it
 * compiles for, and VARIANT for the kernel variant (see prelude.rs).
 *
 * Each thread takes seeds from a shared counter until none is left and searches each one depth first
 * from its level to its unit's tail, where the two last rows are settled by mask tests. The loop is
 * Batch::search in common/src/kernel/seeds.rs line for line: the same completions and the same nodes.
 *
 * seeds:  4 words per seed: c, l, r (the masks its level receives), unit << 5 | level
 * forbid: 32 words per unit: per level, the squares it may not use beyond the queens above
 * tails:  per unit, its third-to-last level
 * out:    2 words per seed: completions, nodes
 * depth:  levels a seed's search may hold at once (at least tail - level + 1 for every seed)
 * stack:  the shared memory of VARIANTs 1, 3 and 5, per thread of the block: 2 * depth words (1); a stack
 *         of 4 * depth words and depth + 1 rows of forbidden squares (3, 5)
 *
 * VARIANT 0 ("local"): the four masks of every level on a per-thread stack (local memory on CUDA).
 * VARIANT 1 ("shared"): the masks of the current level in registers, the diagonals 64 bits wide so that
 * going up a level is exact (a shift loses nothing for 32 levels); per level only the squares left and
 * the queen placed, in shared memory, level-major so that the threads of a warp touch adjacent words.
 * VARIANT 2 ("compact"): VARIANT 1's loop with its two words per level on the per-thread stack.
 * VARIANT 3 ("flat"): one node per pass of one loop with no inner branch, so that the lanes of a warp stay
 * in step: each pass takes the top entry of a stack in shared memory (c, l, r and the squares left, 16
 * bytes, lane-interleaved), tries its lowest square, drops the entry when that was its last square, and
 * pushes the child unless it is a dead end or the tail (settled by mask tests). A level's entry leaves the
 * stack as its last square is tried, so the stack holds at most one entry per level; an entry's level is
 * the seed's plus the queens it adds (popcount of c). A lane copies its seed's rows of forbidden squares
 * into shared memory beside its stack when it takes the seed, so that no pass reads global memory (a
 * launch's table is far larger than the L1 cache: every pass waited for L2).
 * VARIANT 4 ("coop"): the threads of a block search one seed together, from one list of entries (as
 * "flat"'s) in shared memory, so that no thread idles while another descends. Each step, every thread
 * takes one of the list's top entries (one per thread, at most), tries its lowest square, and puts back
 * the entry if squares are left and the child unless it is a dead end or the tail. A child whose subtree
 * is COOP_ALONE levels deep at most is searched by its thread alone, on a stack of its own ("flat"'s
 * loop): the last levels hold the most nodes and the fewest choices, and need no barrier. The list holds
 * COOP_ENTRIES entries per thread; a step that could overflow it has every thread search its child's
 * subtree alone, so the list never grows that step. The
 * threads' counts are summed at the seed's end. All its threads search one unit, so the unit's table of
 * forbidden squares is read into shared memory once per seed. Every branch on which a barrier depends
 * reads shared values written before the barrier before it, so the whole block takes it.
 * VARIANT 5 ("stream"): "flat"'s loop, but a lane whose seed is done writes its answer and takes its next
 * seed inside the node loop, so that it does not wait for the slowest lane of its warp.
 */

#define STACK 32

/* The last two rows below level `tail`: nf has at most two squares; each is a completion when the last
 * row keeps a square once it is placed. Counts the tail's own node too (its caller counts the others). */
#define SETTLE(c, l, r, nf, g_forbid)                                                          \
    do {                                                                                       \
        u32 g = ~((c) | ((l) << 1) | ((r) >> 1) | (g_forbid)) & full;                          \
        u32 b1 = (nf) & (0u - (nf));                                                           \
        u32 b2 = (nf) ^ b1;                                                                    \
        u32 leaves = (u32)((b1 != 0u) & ((g & ~(b1 | (b1 << 1) | (b1 >> 1))) != 0u))           \
                   + (u32)((b2 != 0u) & ((g & ~(b2 | (b2 << 1) | (b2 >> 1))) != 0u));          \
        count += leaves;                                                                       \
        nodes += (u64)(POPCOUNT(nf) + leaves + 1u);                                            \
    } while (0)

/* Takes the next seed from the shared counter (the kernel returns when none is left) and reads it: its
 * masks `s`, its level `v0`, its unit's forbidden squares `fb` and tail level. */
#define TAKE_SEED                                                                              \
    u32 i = ATOMIC_NEXT(next);                                                                 \
    if (i >= nseeds) {                                                                         \
        return;                                                                                \
    }                                                                                          \
    GLOBAL const u32 *s = seeds + 4 * (u64)i;                                                  \
    u32 unit = s[3] >> 5;                                                                      \
    int v0 = (int)(s[3] & 31u);                                                                \
    GLOBAL const u32 *fb = forbid + 32 * (u64)unit;                                            \
    int tail = (int)tails[unit]

/* Writes the seed's completions and nodes. */
#define PUT_ANSWER                                                                             \
    do {                                                                                       \
        out[2 * (u64)i] = count;                                                               \
        out[2 * (u64)i + 1] = nodes;                                                           \
    } while (0)

/* One pass of "flat"'s loop: takes the top entry of the stack `st` (entries every `stride`; `tk` is
 * the top entry's index, 0u - stride when the stack is empty, so that no pass multiplies), tries its
 * lowest square, drops the entry when that was its last, and pushes the child unless it is a dead end
 * or the tail (settled). Uses rows, rstride, boff, last, full, count and nodes: an entry's level is
 * base plus its queens `fq`, so its child's forbidden squares are rows[boff + fq * rstride] (boff a u32
 * offset that wraps back into the rows, never a pointer outside them), and it is at the tail when
 * fq == last (tail - base): no level is formed in the loop. */
#define FLAT_STEP(st, tk, stride)                                                              \
    do {                                                                                       \
        U32X4 fe = (st)[tk];                                                                   \
        u32 ff = fe.w;                                                                         \
        u32 fbit = ff & (0u - ff);                                                             \
        ff ^= fbit;                                                                            \
        (st)[tk].w = ff;                                                                       \
        (tk) -= ff == 0u ? (stride) : 0u;                                                      \
        u32 fq = POPCOUNT(fe.x);                                                               \
        u32 fc = fe.x | fbit;                                                                  \
        u32 fl = (fe.y | fbit) << 1;                                                           \
        u32 fr = (fe.z | fbit) >> 1;                                                           \
        u32 fnf = ~(fc | fl | fr | (rows)[(boff) + fq * (rstride)]) & full;                                \
        if (fq == last) {                                                                      \
            SETTLE(fc, fl, fr, fnf, (rows)[(boff) + (fq + 1u) * (rstride)]);                                 \
        } else {                                                                               \
            nodes += 1;                                                                        \
            if (fnf != 0u) {                                                                   \
                (tk) += (stride);                                                              \
                (st)[tk] = MAKE_U32X4(fc, fl, fr, fnf);                                        \
            }                                                                                  \
        }                                                                                      \
    } while (0)

/* "flat"'s loop: searches depth first whatever the stack `st` holds up to its top entry `tk`, one node
 * per pass, until it is empty. */
#define FLAT_LOOP(st, tk, stride)                                                              \
    do {                                                                                       \
        while ((tk) != 0u - (stride)) {                                                        \
            FLAT_STEP(st, tk, stride);                                                         \
        }                                                                                      \
    } while (0)

/* Reads seed `i` into "flat"'s state: its tail less its `base` (`last`; base is its level less the
 * queens it has), its entry on the stack `st` unless it has no free square, and then its unit's rows of
 * forbidden squares from the row below its level to the tail's second row below (at most depth + 1),
 * into its lane's column of `rows` (row v0 + 1 + k at rows[k * BLOCK]), so that no pass of its search
 * reads global memory; `boff` makes rows[boff + q * BLOCK] the row below an entry with q queens. */
#define FLAT_SEED(st)                                                                          \
    do {                                                                                       \
        GLOBAL const u32 *s = seeds + 4 * (u64)i;                                              \
        u32 unit = s[3] >> 5;                                                                  \
        u32 v0 = s[3] & 31u;                                                                   \
        u32 q0 = POPCOUNT(s[0]); /* above v0 when queens were placed out of order */           \
        GLOBAL const u32 *fb = forbid + 32 * (u64)unit;                                        \
        u32 tail = tails[unit];                                                                \
        last = tail - v0 + q0;                                                                 \
        count = 0;                                                                             \
        nodes = 0;                                                                             \
        u32 f0 = ~(s[0] | s[1] | s[2] | fb[v0]) & full;                                        \
        tk = 0u - stride;                                                                      \
        if (f0 != 0u) {                                                                        \
            (st)[0] = MAKE_U32X4(s[0], s[1], s[2], f0);                                        \
            tk = 0u;                                                                           \
            for (u32 k = 0u; v0 + 1u + k <= tail + 2u; ++k) {                                  \
                rows[k * BLOCK] = fb[v0 + 1u + k];                                             \
            }                                                                                  \
            boff = 0u - q0 * BLOCK;                                                            \
        }                                                                                      \
    } while (0)

KERNEL nq_search(GLOBAL const u32 *RESTRICT seeds, u32 nseeds,
                      GLOBAL const u32 *RESTRICT forbid, GLOBAL const u32 *RESTRICT tails,
                      u32 full, GLOBAL u32 *next, GLOBAL u64 *out, u32 depth STACK_PARAM)
{
#if VARIANT == 0
    u32 cs[STACK], ls[STACK], rs[STACK], fs[STACK];
    (void)depth;
    for (;;) {
        TAKE_SEED;
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
            if (v == tail) {
                SETTLE(c, l, r, nf, fb[v + 2]);
            } else {
                nodes += 1;
                if (nf != 0u) {
                    v += 1;
                    cs[v] = c;
                    ls[v] = l;
                    rs[v] = r;
                    fs[v] = nf;
                }
            }
        }
        PUT_ANSWER;
    }
#elif VARIANT == 4
    u32 t = LOCAL_ID;
    u32 nb = LOCAL_SIZE;
    u32 cap = COOP_ENTRIES * nb;
    SHARED_STACK
    LOCAL_PTR U32X4 *list = (LOCAL_PTR U32X4 *)nq_stack;
    LOCAL_PTR u64 *sums = (LOCAL_PTR u64 *)(nq_stack + 4u * cap);
    LOCAL_PTR u32 *ctl = nq_stack + 4u * cap + 4u * nb;
    /* The forbidden squares of the seed's unit, read from global memory once per seed. */
    LOCAL_PTR u32 *sfb = ctl + 2;
    U32X4 own[STACK];
    (void)depth;
    for (;;) {
        if (t == 0u) {
            ctl[0] = ATOMIC_NEXT(next);
        }
        BARRIER;
        u32 i = ctl[0];
        if (i >= nseeds) {
            return;
        }
        GLOBAL const u32 *s = seeds + 4 * (u64)i;
        u32 unit = s[3] >> 5;
        int v0 = (int)(s[3] & 31u);
        GLOBAL const u32 *gfb = forbid + 32 * (u64)unit;
        LOCAL_PTR const u32 *fb = sfb;
        int tail = (int)tails[unit];
        int base = v0 - (int)POPCOUNT(s[0]);
        /* For "flat"'s loop below a child searched alone. */
        LOCAL_PTR const u32 *rows = fb;
        const u32 rstride = 1u;
        u32 boff = (u32)(base + 1);
        u32 last = (u32)(tail - base);
        u64 count = 0, nodes = 0;
        if (t < 32u) {
            sfb[t] = gfb[t];
        }
        if (t == 0u) {
            u32 f0 = ~(s[0] | s[1] | s[2] | gfb[v0]) & full;
            ctl[1] = 0u;
            if (f0 != 0u) {
                list[0] = MAKE_U32X4(s[0], s[1], s[2], f0);
                ctl[1] = 1u;
            }
        }
        BARRIER;
        for (;;) {
            u32 top = ctl[1];
            if (top == 0u) {
                break;
            }
            u32 take = top < nb ? top : nb;
            /* Each taken entry puts back at most two: the list could pass its end. */
            int alone = top + take > cap;
            int mine = t < take;
            U32X4 e = MAKE_U32X4(0u, 0u, 0u, 0u);
            if (mine) {
                e = list[top - 1u - t];
            }
            BARRIER;
            if (t == 0u) {
                ctl[1] = top - take;
            }
            BARRIER;
            if (mine) {
                u32 f = e.w;
                u32 bit = f & (0u - f);
                f ^= bit;
                if (f != 0u) {
                    list[LOCAL_ATOMIC_INC(ctl + 1)] = MAKE_U32X4(e.x, e.y, e.z, f);
                }
                int v = base + (int)POPCOUNT(e.x);
                u32 c = e.x | bit;
                u32 l = (e.y | bit) << 1;
                u32 r = (e.z | bit) >> 1;
                u32 nf = ~(c | l | r | fb[v + 1]) & full;
                if (v == tail) {
                    SETTLE(c, l, r, nf, fb[v + 2]);
                } else {
                    nodes += 1;
                    if (nf != 0u && !alone && v + COOP_ALONE < tail) {
                        list[LOCAL_ATOMIC_INC(ctl + 1)] = MAKE_U32X4(c, l, r, nf);
                    } else if (nf != 0u) {
                        /* The child's subtree alone (the list full, or the subtree COOP_ALONE levels
                         * deep at most): "flat"'s loop on this thread's own stack (one entry). */
                        own[0] = MAKE_U32X4(c, l, r, nf);
                        u32 h = 0u;
                        FLAT_LOOP(own, h, 1u);
                    }
                }
            }
            BARRIER;
        }
        /* The threads' counts summed in pairs, then pairs of pairs: any block size. */
        sums[t] = count;
        sums[nb + t] = nodes;
        BARRIER;
        for (u32 w = 1u; w < nb; w <<= 1) {
            if ((t & (2u * w - 1u)) == 0u && t + w < nb) {
                sums[t] += sums[t + w];
                sums[nb + t] += sums[nb + t + w];
            }
            BARRIER;
        }
        if (t == 0u) {
            out[2 * (u64)i] = sums[0];
            out[2 * (u64)i + 1] = sums[nb];
        }
        /* ctl[0] is written again only after every thread has read this seed's. */
        BARRIER;
    }
#elif VARIANT == 3 || VARIANT == 5
    u32 t = LOCAL_ID;
    const u32 stride = BLOCK;
    SHARED_STACK
    LOCAL_PTR U32X4 *st = (LOCAL_PTR U32X4 *)nq_stack + t;
    /* After the stacks, each lane's column of its seed's rows of forbidden squares (FLAT_SEED). */
    LOCAL_PTR u32 *rows = nq_stack + 4u * depth * stride + t;
    const u32 rstride = BLOCK;
    u32 boff = 0u;
    u32 last = 0u;
    u64 count = 0, nodes = 0;
    u32 tk = 0u - stride; /* the top entry's index: none */
#if VARIANT == 3
    for (;;) {
        u32 i = ATOMIC_NEXT(next);
        if (i >= nseeds) {
            return;
        }
        FLAT_SEED(st);
        FLAT_LOOP(st, tk, stride);
        PUT_ANSWER;
    }
#else
    /* "stream": a lane whose seed is done writes its answer and takes the next inside the node loop,
     * without waiting for the other lanes of its warp to finish theirs. */
    u32 i = nseeds; /* no seed yet */
    for (;;) {
        if (tk == 0u - stride) {
            if (i < nseeds) {
                PUT_ANSWER;
            }
            i = ATOMIC_NEXT(next);
            if (i >= nseeds) {
                return;
            }
            FLAT_SEED(st);
            continue;
        }
        FLAT_STEP(st, tk, stride);
    }
#endif
#else
#if VARIANT == 1
    u32 t = LOCAL_ID;
    u32 stride = LOCAL_SIZE;
    SHARED_STACK
#define FSQ(k) fsq[(k) * stride]
#define BSQ(k) bsq[(k) * stride]
#else
    u32 fsq[STACK], bsq[STACK];
#define FSQ(k) fsq[k]
#define BSQ(k) bsq[k]
#endif
    for (;;) {
        TAKE_SEED;
        u64 count = 0, nodes = 0;
        int v = v0;
        /* l in the low half (it moves up), r in the high half (it moves down): 32 levels of room. */
        u32 c = s[0];
        u64 l = (u64)s[1];
        u64 r = (u64)s[2] << 32;
        u32 f = ~(s[0] | s[1] | s[2] | fb[v]) & full;
        /* FSQ(k), BSQ(k): the squares left and the queen placed at level v0 + k. */
#if VARIANT == 1
        LOCAL_PTR u32 *fsq = nq_stack + t;
        LOCAL_PTR u32 *bsq = nq_stack + depth * stride + t;
#endif
        for (;;) {
            if (f == 0u) {
                if (v == v0) {
                    break;
                }
                v -= 1;
                u32 k = (u32)(v - v0);
                u32 bit = BSQ(k);
                f = FSQ(k);
                c &= ~bit;
                l = (l >> 1) & ~(u64)bit;
                r = (r << 1) & ~((u64)bit << 32);
                continue;
            }
            u32 bit = f & (0u - f);
            f ^= bit;
            u32 nc = c | bit;
            u64 nl = (l | (u64)bit) << 1;
            u64 nr = (r | ((u64)bit << 32)) >> 1;
            u32 l32 = (u32)nl, r32 = (u32)(nr >> 32);
            u32 nf = ~(nc | l32 | r32 | fb[v + 1]) & full;
            if (v == tail) {
                SETTLE(nc, l32, r32, nf, fb[v + 2]);
            } else {
                nodes += 1;
                if (nf != 0u) {
                    u32 k = (u32)(v - v0);
                    FSQ(k) = f;
                    BSQ(k) = bit;
                    v += 1;
                    c = nc;
                    l = nl;
                    r = nr;
                    f = nf;
                }
            }
        }
        PUT_ANSWER;
    }
#endif
}
