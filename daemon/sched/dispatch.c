/* dispatch.c - routing between the CPU pool and device schedulers (see dispatch.h). */
#include "dispatch.h"

#include <stdio.h>
#include <string.h>

#include "lane.h"
#include "codec.h"
#include "completions.h"
#include "log.h"

/* The batch at which lane `lane` of device index is made to fail (fault injection), 0 = never. */
static uint64_t injected_failure(const gcd_config *cfg, unsigned index, unsigned lane)
{
    if (cfg->fail_batch && cfg->fail_device == index && (cfg->fail_lane < 0 || (unsigned)cfg->fail_lane == lane))
        return cfg->fail_batch;
    if (cfg->gpu == GCD_GPU_EMULATE_FAILING && index == 0) /* its second batch; the others serve on */
        return 2;
    return 0;
}

static bool open_device(gcd_server *s, unsigned index, unsigned lane, gcd_device *dev)
{
    gc_error err = { 0 };
    int rc;
    switch (s->cfg.gpu) {
    case GCD_GPU_EMULATE:
    case GCD_GPU_EMULATE_FAILING: rc = gcd_device_emulated_open(dev, index, false, &err); break;
    case GCD_GPU_EMULATE_LIMIT:
        rc = gcd_device_emulated_open(dev, index, true, &err); /* compress, bzip2 decompress handed back */
        break;
    default: rc = gcd_device_gpu_open(dev, index, s->cfg.batch_bytes, &err); break;
    }
    uint64_t fail_at = injected_failure(&s->cfg, index, lane);
    if (rc == GC_OK && fail_at) {
        rc = gcd_device_fail_at(dev, fail_at, &err);
        if (rc == GC_OK)
            gcd_log(LOG_WARNING, "device %u lane %u: batch %llu will fail (fault injection)", index, lane,
                    (unsigned long long)fail_at);
    }
    if (rc != GC_OK)
        gcd_log(LOG_WARNING, "GPU %u unusable, its work goes to the CPU engine: %s", index, err.msg);
    dev->gpu = index;
    if (rc == GC_OK && s->cfg.device_lanes > 1) { /* name the lane: "gpu0 (...)" -> "gpu0.1 (...)" */
        char named[sizeof dev->name];
        const char *space = strchr(dev->name, ' ');
        int head = space ? (int)(space - dev->name) : (int)strlen(dev->name);
        snprintf(named, sizeof named, "%.*s.%u%s", head, dev->name, lane, space ? space : "");
        memcpy(dev->name, named, sizeof named);
    }
    return rc == GC_OK;
}

static void reroute(gcd_request *r, void *ctx);

bool gcd_dispatch_init(gcd_server *s)
{
    unsigned wanted = 0;
    if (s->cfg.gpu == GCD_GPU_AUTO)
        wanted = gcd_device_gpu_count();
    else if (s->cfg.gpu == GCD_GPU_EMULATE || s->cfg.gpu == GCD_GPU_EMULATE_FAILING ||
             s->cfg.gpu == GCD_GPU_EMULATE_LIMIT)
        wanted = s->cfg.emulated_devices;
    if (wanted > GCD_MAX_LANES)
        wanted = GCD_MAX_LANES;
    if (s->cfg.fail_batch && (s->cfg.fail_device >= wanted || s->cfg.fail_lane >= (int)s->cfg.device_lanes))
        gcd_log(LOG_WARNING,
                "--fail-device %u.%d: no such device or lane (%u devices, %u lanes each): nothing will fail",
                s->cfg.fail_device, s->cfg.fail_lane, wanted, s->cfg.device_lanes);
    gcd_lane_config bc = { s->cfg.batch_bytes, s->cfg.batch_wait_us, s->cfg.codec_threads, reroute, s };
    /* Several lanes per device (each its own context: streams, staging, thread) let
     * batch k+1 be staged while batch k is on the device. */
    for (unsigned k = 0; k < wanted * s->cfg.device_lanes && s->n_lanes < GCD_MAX_LANES; k++) {
        unsigned i = k / s->cfg.device_lanes, lane = k % s->cfg.device_lanes;
        gcd_device dev = { 0 };
        if (!open_device(s, i, lane, &dev))
            continue;
        gcd_lane *b = gcd_lane_start(&dev, &bc, gcd_completions_done, s->completions);
        if (b) {
            s->lanes[s->n_lanes++] = b;
            gcd_log(LOG_INFO, "lane %s ready", gcd_lane_name(b));
        }
    }
    if (s->n_lanes > 0)
        gcd_log(LOG_INFO, "%u GPU%s, %u lane%s", gcd_dispatch_gpus(s), gcd_dispatch_gpus(s) == 1 ? "" : "s",
                s->n_lanes, s->n_lanes == 1 ? "" : "s");
    if (s->cfg.gpu == GCD_GPU_AUTO && s->n_lanes > 0)
        gcd_device_gpu_enable_pinning();
    else if (s->n_lanes > 0)
        gcd_device_emulated_enable_pinning();
    if (s->cfg.gpu == GCD_GPU_AUTO && s->n_lanes == 0)
        gcd_log(LOG_INFO, "no usable GPU: every request runs on the CPU engine");
    return true;
}

/*
 * Input bytes submitted to GPU gpu's lanes and not yet completed: how busy
 * the GPU is, whichever of its lanes holds the work.
 */
static uint64_t gpu_bytes(gcd_server *s, unsigned gpu)
{
    uint64_t bytes = 0;
    for (unsigned i = 0; i < s->n_lanes; i++)
        if (gcd_lane_gpu(s->lanes[i]) == gpu)
            bytes += gcd_lane_get_load(s->lanes[i]).bytes;
    return bytes;
}

/*
 * The lane with the least work: fewest input bytes submitted and not yet
 * completed; between equal lanes, the one whose GPU holds the fewest bytes
 * over all its lanes (two lanes of one GPU share its engines, so an idle
 * GPU's lane beats a busy GPU's idle lane); then fewest requests. Bytes
 * first: one 4 GiB request is more load than sixty 16 MiB ones, and a slow
 * device keeps its bytes longer.
 */
static gcd_lane *least_loaded_lane(gcd_server *s)
{
    gcd_lane *best = NULL;
    gcd_lane_load best_load = { 0 };
    uint64_t best_gpu = 0;
    for (unsigned i = 0; i < s->n_lanes; i++) {
        if (!gcd_lane_accepting(s->lanes[i]))
            continue;
        gcd_lane_load load = gcd_lane_get_load(s->lanes[i]);
        uint64_t gpu = gpu_bytes(s, gcd_lane_gpu(s->lanes[i]));
        bool better = !best || load.bytes < best_load.bytes ||
                      (load.bytes == best_load.bytes &&
                       (gpu < best_gpu || (gpu == best_gpu && load.requests < best_load.requests)));
        if (better) {
            best = s->lanes[i];
            best_load = load;
            best_gpu = gpu;
        }
    }
    return best;
}

/* The work_bytes from which codec's request r goes to a device: its own break-even, or --gpu-min-bytes. */
static uint64_t min_bytes(const gcd_server *s, const gcd_codec *codec, const gcd_request *r)
{
    return codec->gpu_min_bytes ? codec->gpu_min_bytes(&s->cfg, r) : s->cfg.gpu_min_bytes;
}

/* A codec with a GPU backend that takes r (whatever its size). */
static bool device_takes(const gcd_request *r, const gcd_codec **codec)
{
    if (gcd_request_is_registration(r))
        return false;
    *codec = gcd_codec_find(r->codec);
    return *codec && (*codec)->gpu_takes && (*codec)->gpu_takes(r);
}

/*
 * Below its break-even a request still goes to the least-loaded lane when
 * the CPU pool is busy and that lane holds less than one batch
 * (--batch-bytes) of input: it joins the lane's next batch instead of
 * queueing behind the pool. The pool is busy when this request would wait
 * for a worker (queued and running requests at least its threads), or when
 * what it holds already keeps every CPU its codec calls share busy
 * (POOL_BUSY_BYTES of input per CPU): its requests split into blocks that
 * all share those CPUs, so 32 workers running 32 requests on 32 CPUs run
 * each at a 32nd of the speed a free worker suggests. A lone small request
 * on an idle daemon still runs where it is fastest, on the CPU; lanes with
 * a batch's worth queued already leave the rest to the pool.
 */
#define POOL_BUSY_BYTES ((uint64_t)1 << 20)

static bool pool_queued(const gcd_server *s)
{
    return gcd_workers_pending(s->workers) >= gcd_workers_threads(s->workers) ||
           gcd_workers_pending_bytes(s->workers) >= gcd_workers_cpus(s->workers) * POOL_BUSY_BYTES;
}

/* The lane r goes to, or NULL for the CPU pool; counts the requests routed by load. */
static gcd_lane *route(gcd_server *s, const gcd_request *r)
{
    const gcd_codec *codec;
    if (!device_takes(r, &codec))
        return NULL;
    gcd_lane *lane = least_loaded_lane(s);
    if (!lane || codec->work_bytes(r) >= min_bytes(s, codec, r))
        return lane;
    if (!pool_queued(s) || gcd_lane_get_load(lane).bytes >= s->cfg.batch_bytes)
        return NULL;
    s->counters.gpu_by_load++;
    return lane;
}

/*
 * A request a retired lane never ran (it waited in its queue, or was routed
 * there as the device failed), on that lane's thread: to the least-loaded
 * lane in service, else the CPU pool. The lanes are fixed once serving
 * starts; one being stopped takes nothing new (gcd_lane_accepting), so a
 * lane stopped earlier in gcd_dispatch_stop is never handed one.
 */
static void reroute(gcd_request *r, void *ctx)
{
    gcd_server *s = ctx;
    gcd_lane *dev = least_loaded_lane(s);
    if (dev)
        gcd_lane_submit(dev, r);
    else
        gcd_workers_submit(s->workers, r);
}

void gcd_dispatch_submit(gcd_server *s, gcd_request *r)
{
    gcd_lane *dev = route(s, r);
    if (dev)
        gcd_lane_submit(dev, r);
    else
        gcd_workers_submit(s->workers, r);
}

void gcd_dispatch_stop(gcd_server *s)
{
    for (unsigned i = 0; i < s->n_lanes; i++)
        gcd_lane_stop(s->lanes[i]);
    s->n_lanes = 0;
}

void gcd_dispatch_describe(const gcd_server *s, const gcd_codec *codec, char *buf, size_t size)
{
    if (!codec->gpu_takes)
        snprintf(buf, size, "%s: cpu (no GPU backend yet)", codec->name);
    else if (strcmp(gcd_dispatch_backend(s), "gpu") != 0)
        snprintf(buf, size, "%s: cpu (no usable GPU)", codec->name);
    else {
        /* The break-even of each operation, asked with a request that has nothing but its op. */
        gcd_request comp = { .op = GPUCOMP__OP__OP_COMPRESS, .codec = codec->id };
        gcd_request decomp = { .op = GPUCOMP__OP__OP_DECOMPRESS, .codec = codec->id };
        unsigned long long c = min_bytes(s, codec, &comp), d = min_bytes(s, codec, &decomp);
        if (codec->gpu_scope)
            snprintf(buf, size, "%s: gpu for %s from %llu bytes, else cpu", codec->name, codec->gpu_scope,
                     codec->gpu_takes(&comp) ? c : d);
        else if (c == d)
            snprintf(buf, size, "%s: gpu from %llu bytes, else cpu", codec->name, c);
        else
            snprintf(buf, size, "%s: gpu from %llu bytes (compress), %llu (decompress), else cpu", codec->name, c,
                     d);
    }
}

unsigned gcd_dispatch_gpus(const gcd_server *s)
{
    unsigned n = 0;
    for (unsigned i = 0; i < s->n_lanes; i++) {
        bool seen = false;
        for (unsigned j = 0; j < i && !seen; j++)
            seen = gcd_lane_gpu(s->lanes[j]) == gcd_lane_gpu(s->lanes[i]);
        n += !seen;
    }
    return n;
}

const char *gcd_dispatch_backend(const gcd_server *s)
{
    for (unsigned i = 0; i < s->n_lanes; i++)
        if (!gcd_lane_retired(s->lanes[i]))
            return "gpu";
    return "cpu";
}
