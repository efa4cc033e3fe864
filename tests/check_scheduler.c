/*
 * check_scheduler.c - routing, batching, device failure and the memfd
 * transport, on machines without a GPU: the daemon runs with its emulated
 * device (--gpu=emulate), which takes the same scheduler path as a GPU.
 */
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <check.h>

#include "daemon_harness.h"
#include "gpucomp.h"

static test_daemon dut;

static gpucomp_client *connect_or_fail(void)
{
    gpucomp_client *c = NULL;
    int rc = gpucomp_connect(dut.socket_path, &c);
    ck_assert_msg(rc == GPUCOMP_OK, "connect: %s (%s)", gpucomp_strerror(rc), gpucomp_connect_error());
    return c;
}

/* Round trip through c; returns the backend that compressed. */
static gpucomp_backend round_trip(gpucomp_client *c, gpucomp_codec codec, size_t len, uint64_t seed)
{
    uint8_t *data = malloc(len ? len : 1);
    fill_test_data(data, len, 1, seed);
    gpucomp_options o;
    gpucomp_options_init(&o, codec);
    void *packed, *unpacked;
    size_t packed_len, unpacked_len;
    int rc = gpucomp_compress(c, &o, data, len, &packed, &packed_len);
    ck_assert_msg(rc == GPUCOMP_OK, "compress: %s", gpucomp_last_error(c));
    gpucomp_backend backend = gpucomp_last_backend(c);
    rc = gpucomp_decompress(c, &o, packed, packed_len, &unpacked, &unpacked_len);
    ck_assert_msg(rc == GPUCOMP_OK, "decompress: %s", gpucomp_last_error(c));
    ck_assert_uint_eq(unpacked_len, len);
    ck_assert(len == 0 || memcmp(unpacked, data, len) == 0);
    gpucomp_free(packed);
    gpucomp_free(unpacked);
    free(data);
    return backend;
}

static void start_emulated(const char *mode)
{
    const char *args[] = { "--gpu", mode, "--gpu-min-bytes", "1M", "--batch-wait-us", "100000", "--device-lanes",
                           "1",     NULL };
    test_daemon_start(&dut, args);
}

static void teardown(void)
{
    test_daemon_cleanup(&dut);
}

START_TEST(test_routing_by_size_and_codec)
{
    start_emulated("emulate");
    gpucomp_client *c = connect_or_fail();
    ck_assert_int_eq(round_trip(c, GPUCOMP_CODEC_RLE, 1000, 1), GPUCOMP_BACKEND_CPU);
    ck_assert_int_eq(round_trip(c, GPUCOMP_CODEC_RLE, 2u << 20, 2), GPUCOMP_BACKEND_GPU);
    /* bzip2 has a break-even of its own (default 4 MiB): 2 MiB stays on the CPU. */
    ck_assert_int_eq(round_trip(c, GPUCOMP_CODEC_BZIP2, 2u << 20, 3), GPUCOMP_BACKEND_CPU);
    gpucomp_stats st;
    ck_assert_int_eq(gpucomp_stats_get(c, &st), GPUCOMP_OK);
    ck_assert_str_eq(st.backend, "gpu");
    ck_assert_uint_eq(st.gpu_devices, 1);
    ck_assert_str_eq(st.devices[0].name, "emulated0");
    ck_assert_uint_eq(st.devices[0].requests, 2); /* the large rle compress and decompress */
    ck_assert_uint_eq(st.gpu_requests, 2);
    ck_assert_uint_eq(st.cpu_requests, 4);
    /* The routing, as the codec table says it: rle to the device from 1 MiB, bzip2 from
     * its own 4 MiB for a compress (--gpu-min-bytes-bzip2's default) and 8 MiB of
     * compressed input for a decompress (--gpu-min-bytes-bzip2-decompress's). */
    ck_assert_uint_eq(st.n_routing, 2);
    ck_assert_str_eq(st.routing[0], "rle: gpu from 1048576 bytes, else cpu");
    ck_assert_str_eq(st.routing[1], "bzip2: gpu from 4194304 bytes (compress), 8388608 (decompress), else cpu");
    gpucomp_close(c);
}
END_TEST

START_TEST(test_routing_without_a_device)
{
    start_emulated("off");
    gpucomp_client *c = connect_or_fail();
    gpucomp_stats st;
    ck_assert_int_eq(gpucomp_stats_get(c, &st), GPUCOMP_OK);
    ck_assert_uint_eq(st.n_routing, 2);
    ck_assert_str_eq(st.routing[0], "rle: cpu (no usable GPU)");
    ck_assert_str_eq(st.routing[1], "bzip2: cpu (no usable GPU)");
    gpucomp_close(c);
}
END_TEST

static void *concurrent_client(void *arg)
{
    gpucomp_client *c = connect_or_fail();
    round_trip(c, GPUCOMP_CODEC_RLE, (2u << 20) + (size_t)(uintptr_t)arg, (uint64_t)(uintptr_t)arg);
    gpucomp_close(c);
    return NULL;
}

/* n clients at once, each one large rle round trip; returns when all are done. */
static void run_concurrent_clients(unsigned n)
{
    pthread_t t[16];
    ck_assert_uint_le(n, 16);
    for (uintptr_t i = 0; i < n; i++)
        ck_assert_int_eq(pthread_create(&t[i], NULL, concurrent_client, (void *)i), 0);
    for (unsigned i = 0; i < n; i++)
        pthread_join(t[i], NULL);
}

START_TEST(test_concurrent_requests_are_batched)
{
    start_emulated("emulate");
    enum { N = 8 };
    run_concurrent_clients(N);
    gpucomp_client *c = connect_or_fail();
    gpucomp_stats st;
    ck_assert_int_eq(gpucomp_stats_get(c, &st), GPUCOMP_OK);
    ck_assert_uint_eq(st.devices[0].requests, 2 * N);
    /* a 100 ms batch window gathers concurrent requests into shared batches */
    ck_assert_uint_lt(st.devices[0].batches, st.devices[0].requests);
    /* its batches' time, so STATS shows how busy the lane was (a GPU's comes from CUDA events) */
    ck_assert_uint_gt(st.devices[0].wall_ns, 0);
    ck_assert_uint_gt(st.devices[0].kernel_ns, 0);
    ck_assert_uint_le(st.devices[0].kernel_ns, st.devices[0].wall_ns);
    ck_assert_uint_eq(st.requests_failed, 0);
    gpucomp_close(c);
}
END_TEST

/* n concurrent clients' round trips, then STATS: two lanes named name0 and
 * name1 served all 2n requests between them, none failed. */
static void check_two_lanes_serve(unsigned n, const char *name0, const char *name1, gpucomp_stats *st)
{
    run_concurrent_clients(n);
    gpucomp_client *c = connect_or_fail();
    ck_assert_int_eq(gpucomp_stats_get(c, st), GPUCOMP_OK);
    gpucomp_close(c);
    ck_assert_uint_eq(st->gpu_devices, 2);
    ck_assert_str_eq(st->devices[0].name, name0);
    ck_assert_str_eq(st->devices[1].name, name1);
    ck_assert_uint_eq(st->devices[0].requests + st->devices[1].requests, 2 * n);
    ck_assert_uint_eq(st->requests_failed, 0);
}

START_TEST(test_two_lanes_share_the_work)
{
    const char *args[] = { "--gpu", "emulate", "--gpu-min-bytes", "1M", "--device-lanes", "2", NULL };
    test_daemon_start(&dut, args);
    gpucomp_stats st;
    check_two_lanes_serve(8, "emulated0.0", "emulated0.1", &st);
}
END_TEST

START_TEST(test_device_failure_falls_back_to_cpu)
{
    start_emulated("emulate-failing"); /* its second batch fails */
    gpucomp_client *c = connect_or_fail();
    for (int i = 0; i < 4; i++)
        round_trip(c, GPUCOMP_CODEC_RLE, 2u << 20, (uint64_t)i); /* every request still succeeds */
    gpucomp_stats st;
    ck_assert_int_eq(gpucomp_stats_get(c, &st), GPUCOMP_OK);
    ck_assert_int_ne(st.devices[0].retired, 0);
    ck_assert_uint_ge(st.devices[0].fallbacks, 1);
    ck_assert_str_eq(st.backend, "cpu");
    ck_assert_uint_eq(st.requests_failed, 0);
    ck_assert_uint_eq(st.requests_ok, 8);
    /* after retirement, new work goes straight to the CPU engine */
    ck_assert_int_eq(round_trip(c, GPUCOMP_CODEC_RLE, 2u << 20, 9), GPUCOMP_BACKEND_CPU);
    gpucomp_close(c);
}
END_TEST

/* ---- several devices (on stand-in devices) ---------------------------------- */

static void start_devices(const char *mode, const char *count)
{
    const char *args[] = { "--gpu",
                           mode,
                           "--emulated-devices",
                           count,
                           "--gpu-min-bytes",
                           "1M",
                           "--batch-wait-us",
                           "100000",
                           "--device-lanes",
                           "1",
                           NULL };
    test_daemon_start(&dut, args);
}

START_TEST(test_devices_share_the_work)
{
    start_devices("emulate", "2");
    gpucomp_stats st;
    check_two_lanes_serve(8, "emulated0", "emulated1", &st);
    /* a request waits up to 100 ms for its batch: meanwhile the next goes to the idler device */
    ck_assert_uint_gt(st.devices[0].requests, 0);
    ck_assert_uint_gt(st.devices[1].requests, 0);
}
END_TEST

START_TEST(test_failed_device_retired_others_serve)
{
    start_devices("emulate-failing", "2"); /* the first device's second batch fails */
    gpucomp_client *c = connect_or_fail();
    for (int i = 0; i < 4; i++) /* one at a time: each goes to the first device while it serves */
        round_trip(c, GPUCOMP_CODEC_RLE, 2u << 20, (uint64_t)i); /* every request still succeeds */
    gpucomp_stats st;
    ck_assert_int_eq(gpucomp_stats_get(c, &st), GPUCOMP_OK);
    ck_assert_int_ne(st.devices[0].retired, 0);
    ck_assert_uint_ge(st.devices[0].fallbacks, 1);
    ck_assert_int_eq(st.devices[1].retired, 0);
    ck_assert_uint_gt(st.devices[1].requests, 0); /* the work after the failure */
    ck_assert_str_eq(st.backend, "gpu");
    ck_assert_uint_eq(st.requests_failed, 0);
    /* new work still goes to a GPU, the one left */
    ck_assert_int_eq(round_trip(c, GPUCOMP_CODEC_RLE, 2u << 20, 9), GPUCOMP_BACKEND_GPU);
    gpucomp_close(c);
}
END_TEST

typedef struct held_client {
    size_t len;
    int done; /* set (atomically) when its round trip returned */
} held_client;

static void *held_round_trip(void *arg)
{
    held_client *h = arg;
    gpucomp_client *c = connect_or_fail();
    round_trip(c, GPUCOMP_CODEC_RLE, h->len, 7);
    gpucomp_close(c);
    __atomic_store_n(&h->done, 1, __ATOMIC_RELEASE);
    return NULL;
}

/* The device holding n requests in flight, or -1. */
static int device_with_in_flight(const gpucomp_stats *st, uint32_t n)
{
    for (uint32_t k = 0; k < st->gpu_devices; k++)
        if (st->devices[k].requests_in_flight == n)
            return (int)k;
    return -1;
}

/* STATS shows, per device, the load the work is routed by: a request waiting
 * out its 1 s batch window counts on its device, its bytes too, and nothing
 * stays counted once it is answered. */
START_TEST(test_stats_show_load_per_device)
{
    const char *args[] = { "--gpu",
                           "emulate",
                           "--emulated-devices",
                           "2",
                           "--gpu-min-bytes",
                           "1M",
                           "--batch-wait-us",
                           "1000000",
                           "--device-lanes",
                           "1",
                           NULL };
    test_daemon_start(&dut, args);
    held_client h = { (2u << 20) + 4096, 0 };
    pthread_t t;
    ck_assert_int_eq(pthread_create(&t, NULL, held_round_trip, &h), 0);
    gpucomp_client *c = connect_or_fail();
    gpucomp_stats st;
    int seen = -1;
    while (seen < 0 && !__atomic_load_n(&h.done, __ATOMIC_ACQUIRE)) {
        ck_assert_int_eq(gpucomp_stats_get(c, &st), GPUCOMP_OK);
        seen = device_with_in_flight(&st, 1);
        if (seen < 0)
            usleep(1000);
    }
    ck_assert_msg(seen >= 0, "no device showed the request while it waited for its batch");
    ck_assert_uint_eq(st.devices[seen].bytes_in_flight, h.len); /* the compress: its input */
    ck_assert_uint_eq(st.devices[1 - seen].requests_in_flight, 0);
    ck_assert_uint_eq(st.devices[1 - seen].bytes_in_flight, 0);
    pthread_join(t, NULL);
    ck_assert_int_eq(gpucomp_stats_get(c, &st), GPUCOMP_OK);
    ck_assert_uint_eq(st.devices[0].requests + st.devices[1].requests, 2); /* compress, decompress */
    for (uint32_t k = 0; k < 2; k++) {
        ck_assert_uint_eq(st.devices[k].requests_in_flight, 0);
        ck_assert_uint_eq(st.devices[k].bytes_in_flight, 0);
    }
    gpucomp_close(c);
    /* gpucomp --stats prints them, in text and in JSON */
    const char *cli = getenv("GPUCOMP");
    ck_assert_msg(cli != NULL, "GPUCOMP (path of the CLI) is not set");
    ck_assert_int_eq(run_shell("'%s' --socket %s --stats | grep -c 'in flight: *0 requests, 0 B' | grep -qx 2",
                               cli, dut.socket_path),
                     0);
    ck_assert_int_eq(
        run_shell("'%s' --socket %s --stats --json | python3 -c 'import json,sys\n"
                  "d = json.load(sys.stdin)[\"lanes\"]\n"
                  "assert len(d) == 2, d\n"
                  "assert all(x[\"requests_in_flight\"] == 0 == x[\"bytes_in_flight\"] for x in d), d'",
                  cli, dut.socket_path),
        0);
}
END_TEST

/*
 * Two GPUs of two lanes each, every lane idle: two requests waiting out
 * their batch window at once sit on lanes of different GPUs, not on both
 * lanes of GPU 0 (lanes of one GPU share its engines).
 */
START_TEST(test_idle_gpus_are_filled_before_second_lanes)
{
    const char *args[] = { "--gpu",
                           "emulate",
                           "--emulated-devices",
                           "2",
                           "--gpu-min-bytes",
                           "1M",
                           "--batch-wait-us",
                           "1000000",
                           "--device-lanes",
                           "2",
                           NULL };
    test_daemon_start(&dut, args);
    held_client h[2] = { { (2u << 20) + 4096, 0 }, { (2u << 20) + 8192, 0 } };
    pthread_t t[2];
    gpucomp_client *c = connect_or_fail();
    gpucomp_stats st;
    for (int k = 0; k < 2; k++) {
        ck_assert_int_eq(pthread_create(&t[k], NULL, held_round_trip, &h[k]), 0);
        int seen = -1; /* one at a time, so the second is routed while the first waits */
        while (seen < 0 && !__atomic_load_n(&h[k].done, __ATOMIC_ACQUIRE)) {
            ck_assert_int_eq(gpucomp_stats_get(c, &st), GPUCOMP_OK);
            uint32_t waiting = 0;
            for (uint32_t i = 0; i < st.gpu_devices; i++)
                waiting += st.devices[i].requests_in_flight;
            if (waiting == (uint32_t)k + 1)
                seen = 1;
            else
                usleep(1000);
        }
        ck_assert_msg(seen > 0, "request %d was not seen waiting for its batch", k);
    }
    int gpu_of[2] = { -1, -1 }, n = 0;
    for (uint32_t i = 0; i < st.gpu_devices && n < 2; i++)
        if (st.devices[i].requests_in_flight)
            gpu_of[n++] = (int)st.devices[i].gpu;
    ck_assert_int_eq(n, 2);
    ck_assert_msg(gpu_of[0] != gpu_of[1], "both waiting requests went to GPU %d while the other idled", gpu_of[0]);
    for (int k = 0; k < 2; k++)
        pthread_join(t[k], NULL);
    gpucomp_close(c);
}
END_TEST

/* Two GPUs of two lanes each: STATS, gpucomp --stats and its JSON call them
 * 2 GPUs and 4 lanes, each lane with the GPU it runs on. */
START_TEST(test_stats_name_gpus_and_lanes)
{
    const char *args[] = { "--gpu", "emulate", "--emulated-devices", "2", "--device-lanes", "2", NULL };
    test_daemon_start(&dut, args);
    gpucomp_client *c = connect_or_fail();
    gpucomp_stats st;
    ck_assert_int_eq(gpucomp_stats_get(c, &st), GPUCOMP_OK);
    gpucomp_close(c);
    ck_assert_uint_eq(st.gpus, 2);
    ck_assert_uint_eq(st.gpu_devices, 4);
    for (unsigned k = 0; k < 4; k++)
        ck_assert_uint_eq(st.devices[k].gpu, k / 2);
    ck_assert_str_eq(st.devices[3].name, "emulated1.1");
    const char *cli = getenv("GPUCOMP");
    ck_assert_msg(cli != NULL, "GPUCOMP (path of the CLI) is not set");
    const char *sock = dut.socket_path;
    ck_assert_int_eq(run_shell("'%s' --socket %s --stats | grep -q 'backend: *gpu (2 GPUs, 4 lanes)$'", cli, sock),
                     0);
    ck_assert_int_eq(
        run_shell("'%s' --socket %s --stats | grep -q '^  lane 3: *emulated1.1 on GPU 1$'", cli, sock), 0);
    ck_assert_int_eq(run_shell("'%s' --socket %s --stats --json | python3 -c 'import json,sys\n"
                               "o = json.load(sys.stdin)\n"
                               "assert o[\"gpus\"] == 2 and o[\"n_lanes\"] == 4, o\n"
                               "assert [x[\"gpu\"] for x in o[\"lanes\"]] == [0, 0, 1, 1], o'",
                               cli, sock),
                     0);
}
END_TEST

/* ---- routing by load --------------------------------------------------------- */

static void *small_bzip2_client(void *arg)
{
    gpucomp_client *c = connect_or_fail();
    round_trip(c, GPUCOMP_CODEC_BZIP2, (1u << 20) + (size_t)(uintptr_t)arg, 100 + (uint64_t)(uintptr_t)arg);
    gpucomp_close(c);
    return NULL;
}

/* One CPU worker and bzip2 round trips below bzip2's break-even (4 MiB). */
static void start_one_worker(const char *mode)
{
    const char *args[] = {
        "--gpu", mode, "--workers", "1", "--device-lanes", "1", "--batch-wait-us", "1000", NULL
    };
    test_daemon_start(&dut, args);
}

/* A lone small request on an idle daemon runs where it is fastest: the CPU. */
START_TEST(test_lone_small_request_stays_on_cpu)
{
    start_one_worker("emulate");
    gpucomp_client *c = connect_or_fail();
    ck_assert_int_eq(round_trip(c, GPUCOMP_CODEC_BZIP2, 1u << 20, 7), GPUCOMP_BACKEND_CPU);
    gpucomp_stats st;
    ck_assert_int_eq(gpucomp_stats_get(c, &st), GPUCOMP_OK);
    ck_assert_uint_eq(st.devices[0].requests, 0);
    ck_assert_uint_eq(st.gpu_by_load, 0);
    ck_assert_uint_eq(st.cpu_requests, 2);
    gpucomp_close(c);
}
END_TEST

static void run_small_bzip2_clients(unsigned n)
{
    pthread_t t[16];
    ck_assert_uint_le(n, 16);
    for (uintptr_t i = 0; i < n; i++)
        ck_assert_int_eq(pthread_create(&t[i], NULL, small_bzip2_client, (void *)i), 0);
    for (unsigned i = 0; i < n; i++)
        pthread_join(t[i], NULL);
}

/*
 * n small clients at once, then STATS: none failed, every round trip ran
 * once on one side, the first found the CPU free, and what went to the lane
 * below its break-even is counted as routed by load.
 */
static gpucomp_stats small_clients_then_stats(unsigned n)
{
    run_small_bzip2_clients(n);
    gpucomp_client *c = connect_or_fail();
    gpucomp_stats st;
    ck_assert_int_eq(gpucomp_stats_get(c, &st), GPUCOMP_OK);
    gpucomp_close(c);
    ck_assert_uint_eq(st.requests_failed, 0);
    ck_assert_uint_eq(st.cpu_requests + st.gpu_requests, 2 * n);
    ck_assert_uint_gt(st.cpu_requests, 0);
    ck_assert_uint_eq(st.gpu_by_load, st.devices[0].requests + st.devices[0].fallbacks);
    return st;
}

/* Small requests while the one worker is busy: the idle lane takes some of
 * them (compress and decompress alike), every round trip still exact, and
 * STATS counts them as routed by load. */
START_TEST(test_small_requests_go_to_idle_lane_when_cpu_queued)
{
    start_one_worker("emulate");
    gpucomp_stats st = small_clients_then_stats(8);
    ck_assert_uint_gt(st.devices[0].requests, 0);
    const char *cli = getenv("GPUCOMP");
    ck_assert_msg(cli != NULL, "GPUCOMP (path of the CLI) is not set");
    ck_assert_int_eq(run_shell("'%s' --socket %s --stats | grep -q 'routed by load:  %u requests'", cli,
                               dut.socket_path, st.gpu_by_load),
                     0);
}
END_TEST

/*
 * Free workers are not free CPUs: with 16 workers whose codec calls share
 * one CPU, a few small requests at once already keep it busy, so the idle
 * lane takes some of them (before, it took none until 16 were queued).
 */
START_TEST(test_small_requests_go_to_idle_lane_when_cpus_busy)
{
    const char *args[] = { "--gpu", "emulate",         "--workers", "16", "--codec-threads", "1", "--device-lanes",
                           "1",     "--batch-wait-us", "1000",      NULL };
    test_daemon_start(&dut, args);
    gpucomp_stats st = small_clients_then_stats(8);
    ck_assert_uint_gt(st.gpu_by_load, 0);
}
END_TEST

/* The same on a device that hands every compress back and refuses every
 * bzip2 stream (as the GPU may below its break-even): what the lane took by
 * load reruns on the CPU engine, every round trip still exact. */
START_TEST(test_small_requests_declined_by_lane_rerun_on_cpu)
{
    start_one_worker("emulate-limit");
    enum { N = 8 };
    gpucomp_stats st = small_clients_then_stats(N);
    ck_assert_uint_eq(st.gpu_requests, 0);
    ck_assert_uint_eq(st.cpu_requests, 2 * N);
    ck_assert_uint_gt(st.gpu_by_load, 0);
    ck_assert_uint_eq(st.devices[0].fallbacks, st.gpu_by_load);
}
END_TEST

/* Fault injection on the second of two devices (what --fail-device does to a
 * GPU): its first batch fails, it is retired, every request is still
 * answered, and the first device takes the work from then on. */
START_TEST(test_injected_failure_retires_that_device_only)
{
    const char *args[] = { "--gpu",
                           "emulate",
                           "--emulated-devices",
                           "2",
                           "--fail-device",
                           "1",
                           "--gpu-min-bytes",
                           "1M",
                           "--batch-wait-us",
                           "100000",
                           "--device-lanes",
                           "1",
                           NULL };
    test_daemon_start(&dut, args);
    run_concurrent_clients(8); /* 16 requests: both devices get work */
    gpucomp_client *c = connect_or_fail();
    gpucomp_stats st;
    ck_assert_int_eq(gpucomp_stats_get(c, &st), GPUCOMP_OK);
    ck_assert_uint_eq(st.requests_failed, 0);
    ck_assert_int_eq(st.devices[0].retired, 0);
    ck_assert_int_ne(st.devices[1].retired, 0);
    ck_assert_uint_ge(st.devices[1].fallbacks, 1); /* its batch reran on the CPU engine */
    ck_assert_uint_eq(st.devices[0].fallbacks, 0);
    /* a device counts the requests it served; the failed batch's are its fallbacks */
    ck_assert_uint_eq(st.devices[0].requests + st.devices[1].requests + st.devices[1].fallbacks, 16);
    uint64_t before = st.devices[0].requests;
    ck_assert_int_eq(round_trip(c, GPUCOMP_CODEC_RLE, 2u << 20, 11), GPUCOMP_BACKEND_GPU);
    ck_assert_int_eq(gpucomp_stats_get(c, &st), GPUCOMP_OK);
    ck_assert_uint_eq(st.devices[0].requests, before + 2);
    ck_assert_str_eq(st.backend, "gpu");
    gpucomp_close(c);
}
END_TEST

/* --fail-device N.L: one lane of a device (a context of its own) fails; the
 * device's other lane serves on. On a one-GPU host this is the failover that
 * can be shown on real hardware. */
START_TEST(test_injected_failure_of_one_lane)
{
    const char *args[] = {
        "--gpu", "emulate",         "--device-lanes", "2", "--fail-device", "0.1", "--gpu-min-bytes",
        "1M",    "--batch-wait-us", "100000",         NULL
    };
    test_daemon_start(&dut, args);
    run_concurrent_clients(8);
    gpucomp_client *c = connect_or_fail();
    gpucomp_stats st;
    ck_assert_int_eq(gpucomp_stats_get(c, &st), GPUCOMP_OK);
    ck_assert_uint_eq(st.gpu_devices, 2);
    ck_assert_str_eq(st.devices[1].name, "emulated0.1");
    ck_assert_uint_eq(st.requests_failed, 0);
    ck_assert_int_eq(st.devices[0].retired, 0);
    ck_assert_int_ne(st.devices[1].retired, 0);
    ck_assert_uint_eq(st.devices[0].requests + st.devices[1].requests + st.devices[1].fallbacks, 16);
    ck_assert_int_eq(round_trip(c, GPUCOMP_CODEC_RLE, 2u << 20, 12), GPUCOMP_BACKEND_GPU);
    gpucomp_close(c);
}
END_TEST

/* One client's stream (the gpucomp command compressing a file) is worked on in
 * parts, each routed on its own: several devices share it. */
START_TEST(test_one_stream_uses_every_device)
{
    start_devices("emulate", "2"); /* a part waits up to 100 ms for its batch: the next goes to the other */
    const char *cli = getenv("GPUCOMP");
    ck_assert_msg(cli != NULL, "GPUCOMP (path of the CLI) is not set");
    const char *d = dut.dir, *s = dut.socket_path;
    ck_assert_int_eq(run_shell("head -c %u /dev/zero | tr '\\0' x > %s/big && "
                               "'%s' --socket %s --no-fallback -a rle -c %s/big > %s/big.rle && "
                               "'%s' --socket %s --no-fallback -a rle -dc %s/big.rle | cmp -s - %s/big",
                               128u << 20, d, cli, s, d, d, cli, s, d, d),
                     0);
    gpucomp_client *c = connect_or_fail();
    gpucomp_stats st;
    ck_assert_int_eq(gpucomp_stats_get(c, &st), GPUCOMP_OK);
    ck_assert_uint_gt(st.devices[0].requests, 0);
    ck_assert_uint_gt(st.devices[1].requests, 0);
    ck_assert_uint_eq(st.requests_failed, 0);
    gpucomp_close(c);
}
END_TEST

typedef struct async_compress {
    gpucomp_codec codec;
    size_t len;
    uint64_t seed;
    int rc;
    gpucomp_backend backend;
} async_compress;

/* One compress on a connection of its own; its status and backend into *arg. */
static void *compress_thread(void *arg)
{
    async_compress *a = arg;
    gpucomp_client *c = connect_or_fail();
    uint8_t *data = malloc(a->len);
    fill_test_data(data, a->len, 1, a->seed);
    gpucomp_options o;
    gpucomp_options_init(&o, a->codec);
    void *packed = NULL;
    size_t packed_len = 0;
    a->rc = gpucomp_compress(c, &o, data, a->len, &packed, &packed_len);
    a->backend = gpucomp_last_backend(c);
    gpucomp_free(packed);
    free(data);
    gpucomp_close(c);
    return NULL;
}

/* Poll STATS until device k holds `requests` requests in flight (10 s at most). */
static void wait_in_flight(gpucomp_client *c, unsigned k, uint32_t requests)
{
    gpucomp_stats st;
    for (int i = 0; i < 10000; i++) {
        ck_assert_int_eq(gpucomp_stats_get(c, &st), GPUCOMP_OK);
        if (st.devices[k].requests_in_flight == requests)
            return;
        usleep(1000);
    }
    ck_abort_msg("device %u never held %u requests in flight", k, requests);
}

/*
 * A request waiting in the queue of a device that then fails goes to a device
 * still in service, not to the CPU engine. Device 0 runs a slow bzip2 batch
 * that fails at its end; device 1 is busier (a larger bzip2 request), so the
 * small rle request routed meanwhile queues on device 0. Only the failed
 * batch reruns on the CPU; the waiting request is served by device 1.
 */
/* Two stand-in devices; device 0 fails its first batch at its end. The failing
 * request (a slow bzip2 batch on device 0) and a busier one on device 1 are
 * started and in flight when this returns, so the next small request queues
 * on device 0. */
static gpucomp_client *start_failure_scene(async_compress *failing, async_compress *busy, pthread_t t[2])
{
    const char *args[] = { "--gpu",
                           "emulate",
                           "--emulated-devices",
                           "2",
                           "--fail-device",
                           "0:1",
                           "--gpu-min-bytes",
                           "1M",
                           "--gpu-min-bytes-bzip2",
                           "1M",
                           "--batch-wait-us",
                           "1000",
                           "--device-lanes",
                           "1",
                           "--codec-threads",
                           "1",
                           NULL };
    test_daemon_start(&dut, args);
    gpucomp_client *c = connect_or_fail();
    *failing = (async_compress){ GPUCOMP_CODEC_BZIP2, 8u << 20, 1, -1, 0 };
    *busy = (async_compress){ GPUCOMP_CODEC_BZIP2, 12u << 20, 2, -1, 0 };
    ck_assert_int_eq(pthread_create(&t[0], NULL, compress_thread, failing), 0);
    wait_in_flight(c, 0, 1);
    ck_assert_int_eq(pthread_create(&t[1], NULL, compress_thread, busy), 0);
    wait_in_flight(c, 1, 1);
    return c;
}

START_TEST(test_queued_work_of_a_failed_device_moves_on)
{
    async_compress failing, busy, waiting = { GPUCOMP_CODEC_RLE, 2u << 20, 3, -1, 0 };
    pthread_t t[3];
    gpucomp_client *c = start_failure_scene(&failing, &busy, t);
    ck_assert_int_eq(pthread_create(&t[2], NULL, compress_thread, &waiting), 0);
    wait_in_flight(c, 0, 2); /* it queued behind the failing batch */
    for (int i = 0; i < 3; i++)
        pthread_join(t[i], NULL);
    ck_assert_int_eq(failing.rc, GPUCOMP_OK);
    ck_assert_int_eq(busy.rc, GPUCOMP_OK);
    ck_assert_int_eq(waiting.rc, GPUCOMP_OK);
    ck_assert_int_eq(failing.backend, GPUCOMP_BACKEND_CPU); /* its batch failed: rerun on the CPU */
    ck_assert_int_eq(busy.backend, GPUCOMP_BACKEND_GPU);
    ck_assert_int_eq(waiting.backend, GPUCOMP_BACKEND_GPU); /* moved to device 1 */
    gpucomp_stats st;
    ck_assert_int_eq(gpucomp_stats_get(c, &st), GPUCOMP_OK);
    ck_assert_int_ne(st.devices[0].retired, 0);
    ck_assert_uint_eq(st.devices[0].fallbacks, 1);
    ck_assert_uint_eq(st.devices[1].requests, 2);
    ck_assert_uint_eq(st.requests_failed, 0);
    gpucomp_close(c);
}
END_TEST

/*
 * A hostile peer: its request waits on the device that fails, and the client
 * is killed meanwhile. The moved request is dropped where it lands, the
 * others are answered, no load stays counted on any device, and the daemon
 * serves on.
 */
START_TEST(test_vanished_client_on_a_failed_device)
{
    /* The peer is forked first, while this process has one thread; it waits for the socket's path. */
    int go[2];
    ck_assert_int_eq(pipe(go), 0);
    pid_t pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0) {
        close(go[1]);
        ssize_t n = read(go[0], dut.socket_path, sizeof dut.socket_path - 1);
        if (n <= 0)
            _exit(1);
        dut.socket_path[n] = '\0';
        async_compress gone = { GPUCOMP_CODEC_RLE, 2u << 20, 4, -1, 0 };
        compress_thread(&gone);
        _exit(0);
    }
    close(go[0]);
    async_compress failing, busy;
    pthread_t t[2];
    gpucomp_client *c = start_failure_scene(&failing, &busy, t);
    size_t len = strlen(dut.socket_path);
    ck_assert_int_eq(write(go[1], dut.socket_path, len), (ssize_t)len);
    close(go[1]);
    wait_in_flight(c, 0, 2); /* its request queued behind the failing batch */
    ck_assert_int_eq(kill(pid, SIGKILL), 0);
    ck_assert_int_eq(waitpid(pid, NULL, 0), pid);
    for (int i = 0; i < 2; i++)
        pthread_join(t[i], NULL);
    ck_assert_int_eq(failing.rc, GPUCOMP_OK);
    ck_assert_int_eq(busy.rc, GPUCOMP_OK);
    wait_in_flight(c, 0, 0);
    wait_in_flight(c, 1, 0);
    gpucomp_stats st;
    ck_assert_int_eq(gpucomp_stats_get(c, &st), GPUCOMP_OK);
    ck_assert_uint_eq(st.devices[0].bytes_in_flight, 0);
    ck_assert_uint_eq(st.devices[1].bytes_in_flight, 0);
    ck_assert_int_ne(st.devices[0].retired, 0);
    ck_assert_int_eq(round_trip(c, GPUCOMP_CODEC_RLE, 2u << 20, 5), GPUCOMP_BACKEND_GPU);
    gpucomp_close(c);
}
END_TEST

/* ---- bzip2 on the device --------------------------------------------------- */

/* An emulated device in mode, bzip2 goes to it from 2 MiB, compress and decompress (rle from 1 MiB). */
static void start_bzip2_routing(const char *mode, const char *const *more)
{
    const char *args[32] = { "--gpu",
                             mode,
                             "--gpu-min-bytes",
                             "1M",
                             "--gpu-min-bytes-bzip2",
                             "2M",
                             "--gpu-min-bytes-bzip2-decompress",
                             "2M",
                             "--batch-wait-us",
                             "1000",
                             "--device-lanes",
                             "1" };
    size_t n = 12;
    for (size_t i = 0; more && more[i] && n < 31; i++)
        args[n++] = more[i];
    args[n] = NULL;
    test_daemon_start(&dut, args);
}

/* len bytes of test data of kind, also written to dir/name. */
static uint8_t *data_file(const char *name, size_t len, int kind, uint64_t seed)
{
    uint8_t *data = malloc(len);
    ck_assert_ptr_nonnull(data);
    fill_test_data(data, len, kind, seed);
    char path[160];
    snprintf(path, sizeof path, "%s/%s", dut.dir, name);
    ck_assert_int_eq(write_file(path, data, len), 0);
    return data;
}

/*
 * packed (packed_len bytes) is the stream bz2_compress makes of dir/name at
 * level (gpucomp --local runs the same function in its own process), and
 * bunzip2 (libbz2) gives dir/name back from it.
 */
static void assert_cpu_engine_stream(const char *name, int level, const void *packed, size_t packed_len)
{
    const char *cli = getenv("GPUCOMP");
    ck_assert_msg(cli != NULL, "GPUCOMP (path of the CLI) is not set");
    char path[160];
    snprintf(path, sizeof path, "%s/%s.bz2", dut.dir, name);
    ck_assert_int_eq(write_file(path, packed, packed_len), 0);
    ck_assert_msg(run_shell("env -u BZIP2 -u BZIP '%s' --local -q -c -%d %s/%s | cmp -s - %s", cli, level, dut.dir,
                            name, path) == 0,
                  "the stream differs from bz2_compress's at level %d", level);
    ck_assert_msg(run_shell("bunzip2 -c %s | cmp -s - %s/%s", path, dut.dir, name) == 0,
                  "bunzip2 does not give %s back", name);
}

/* Compress data through c with bzip2 at level; returns the backend that served it. */
static gpucomp_backend bzip2_compress(gpucomp_client *c, int level, const char *name, const uint8_t *data,
                                      size_t len)
{
    gpucomp_options o;
    gpucomp_options_init(&o, GPUCOMP_CODEC_BZIP2);
    o.level = level;
    void *packed;
    size_t packed_len;
    ck_assert_msg(gpucomp_compress(c, &o, data, len, &packed, &packed_len) == GPUCOMP_OK, "compress: %s",
                  gpucomp_last_error(c));
    gpucomp_backend backend = gpucomp_last_backend(c);
    assert_cpu_engine_stream(name, level, packed, packed_len);
    gpucomp_free(packed);
    return backend;
}

/* Wait until the daemon holds no request memory (responses are released as the kernel takes them). */
static uint64_t await_memory_released(gpucomp_client *c)
{
    gpucomp_stats st;
    for (int i = 0; i < 500; i++) {
        ck_assert_int_eq(gpucomp_stats_get(c, &st), GPUCOMP_OK);
        if (st.memory_in_use == 0)
            break;
        usleep(10000);
    }
    return st.memory_in_use;
}

/* A bzip2 compress from its break-even goes to the device and comes back as the CPU engine's stream. */
START_TEST(test_bzip2_compress_goes_to_device)
{
    start_bzip2_routing("emulate", NULL);
    gpucomp_client *c = connect_or_fail();
    size_t big = 3u << 20, small = 3u << 19; /* above and below 2 MiB, both above 1 MiB */
    uint8_t *text = data_file("text", big, 2, 11), *runs = data_file("runs", small, 1, 12);
    ck_assert_int_eq(bzip2_compress(c, 5, "text", text, big), GPUCOMP_BACKEND_GPU);
    ck_assert_int_eq(bzip2_compress(c, 9, "runs", runs, small), GPUCOMP_BACKEND_CPU);
    gpucomp_stats st;
    ck_assert_int_eq(gpucomp_stats_get(c, &st), GPUCOMP_OK);
    ck_assert_uint_eq(st.devices[0].requests, 1);
    ck_assert_uint_eq(st.devices[0].bytes_in, big);
    ck_assert_uint_eq(st.devices[0].fallbacks, 0);
    ck_assert_uint_eq(st.gpu_requests, 1);
    ck_assert_uint_eq(st.cpu_requests, 1);
    ck_assert_uint_eq(st.requests_failed, 0);
    ck_assert_str_eq(st.routing[1], "bzip2: gpu from 2097152 bytes, else cpu");
    free(text);
    free(runs);
    gpucomp_close(c);
}
END_TEST

/* data (len bytes) compressed with bzip2 through c, on whichever backend; the caller frees it. */
static void *bzip2_packed(gpucomp_client *c, const uint8_t *data, size_t len, size_t *packed_len)
{
    gpucomp_options o;
    gpucomp_options_init(&o, GPUCOMP_CODEC_BZIP2);
    void *packed;
    ck_assert_msg(gpucomp_compress(c, &o, data, len, &packed, packed_len) == GPUCOMP_OK, "compress: %s",
                  gpucomp_last_error(c));
    return packed;
}

/*
 * Decompress packed through the memfd transport with max_output (0: the
 * daemon's); on success, assert the output memfd holds want (want_len bytes).
 * Returns the status.
 */
static int bzip2_decompress_fd(gpucomp_client *c, const void *packed, size_t packed_len, uint64_t max_output,
                               const uint8_t *want, size_t want_len)
{
    int in = gpucomp_memfd_create("in"), out = gpucomp_memfd_create("out");
    ck_assert(in >= 0 && out >= 0);
    ck_assert_int_eq(pwrite(in, packed, packed_len, 0), (ssize_t)packed_len);
    gpucomp_options o;
    gpucomp_options_init(&o, GPUCOMP_CODEC_BZIP2);
    o.max_output = max_output;
    size_t back_len = 0;
    int rc = gpucomp_decompress_fd(c, &o, in, packed_len, out, &back_len);
    if (rc == GPUCOMP_OK) {
        ck_assert_uint_eq(back_len, want_len);
        uint8_t *back = malloc(want_len ? want_len : 1);
        ck_assert_int_eq(pread(out, back, want_len, 0), (ssize_t)want_len);
        ck_assert(memcmp(back, want, want_len) == 0);
        free(back);
    }
    close(in), close(out);
    return rc;
}

/* Decompress packed through the socket and assert it gives want back. */
static void bzip2_decompress_buffer(gpucomp_client *c, const void *packed, size_t packed_len, const uint8_t *want,
                                    size_t want_len)
{
    gpucomp_options o;
    gpucomp_options_init(&o, GPUCOMP_CODEC_BZIP2);
    void *back;
    size_t back_len;
    ck_assert_msg(gpucomp_decompress(c, &o, packed, packed_len, &back, &back_len) == GPUCOMP_OK, "decompress: %s",
                  gpucomp_last_error(c));
    ck_assert_uint_eq(back_len, want_len);
    ck_assert(memcmp(back, want, want_len) == 0);
    gpucomp_free(back);
}

/*
 * A bzip2 decompress from the break-even (its compressed input) goes to the
 * device: its output grows through the codec's grow hook, round after round,
 * and reaches the client byte for byte, through the socket and through its
 * output memfd (gpu_finish); two concatenated streams give their
 * concatenation. A smaller one stays on the CPU engine.
 */
START_TEST(test_bzip2_decompress_goes_to_device)
{
    start_bzip2_routing("emulate", NULL);
    gpucomp_client *c = connect_or_fail();
    size_t len = 3u << 20, small = 1u << 20;
    uint8_t *noise = data_file("noise", len, 0, 13); /* incompressible: the stream is over 2 MiB too */
    uint8_t *runs = data_file("runs", small, 1, 16);
    size_t packed_len, runs_packed_len;
    uint8_t *packed = bzip2_packed(c, noise, len, &packed_len);
    uint8_t *runs_packed = bzip2_packed(c, runs, small, &runs_packed_len);
    ck_assert_uint_gt(packed_len, 2u << 20);
    bzip2_decompress_buffer(c, packed, packed_len, noise, len);
    ck_assert_int_eq(gpucomp_last_backend(c), GPUCOMP_BACKEND_GPU);
    ck_assert_int_eq(bzip2_decompress_fd(c, packed, packed_len, 0, noise, len), GPUCOMP_OK);
    ck_assert_int_eq(gpucomp_last_backend(c), GPUCOMP_BACKEND_GPU);
    /* Two streams back to back: 6 MiB out of one job. */
    uint8_t *two = malloc(2 * packed_len), *twice = malloc(2 * len);
    memcpy(two, packed, packed_len), memcpy(two + packed_len, packed, packed_len);
    memcpy(twice, noise, len), memcpy(twice + len, noise, len);
    bzip2_decompress_buffer(c, two, 2 * packed_len, twice, 2 * len);
    ck_assert_int_eq(gpucomp_last_backend(c), GPUCOMP_BACKEND_GPU);
    ck_assert_int_eq(bzip2_decompress_fd(c, two, 2 * packed_len, 0, twice, 2 * len), GPUCOMP_OK);
    ck_assert_int_eq(gpucomp_last_backend(c), GPUCOMP_BACKEND_GPU);
    /* Under the break-even: the CPU engine. */
    bzip2_decompress_buffer(c, runs_packed, runs_packed_len, runs, small);
    ck_assert_int_eq(gpucomp_last_backend(c), GPUCOMP_BACKEND_CPU);
    gpucomp_stats st;
    ck_assert_int_eq(gpucomp_stats_get(c, &st), GPUCOMP_OK);
    ck_assert_uint_eq(st.devices[0].requests, 5); /* the noise compress and four decompresses */
    ck_assert_uint_eq(st.devices[0].fallbacks, 0);
    ck_assert_uint_eq(st.devices[0].bytes_in, len + 3 * packed_len * 2);
    ck_assert_uint_eq(st.gpu_requests, 5);
    ck_assert_uint_eq(st.cpu_requests, 2);
    ck_assert_uint_eq(st.requests_failed, 0);
    ck_assert_str_eq(st.routing[1], "bzip2: gpu from 2097152 bytes, else cpu");
    ck_assert_uint_eq(await_memory_released(c), 0);
    free(two), free(twice);
    gpucomp_free(packed);
    gpucomp_free(runs_packed);
    free(noise), free(runs);
    gpucomp_close(c);
}
END_TEST

/*
 * A hostile fd request on the device's decode path: the output memfd is
 * sealed against growing, so the output cannot be sized as it grows (the
 * emulated device feeds it through the job's grow hook, as the GPU does).
 * The client gets an error, the CPU rerun fails the same way, the daemon
 * keeps serving and gives its memory back.
 */
START_TEST(test_bzip2_decompress_into_unsizable_memfd)
{
    start_bzip2_routing("emulate", NULL);
    gpucomp_client *c = connect_or_fail();
    size_t len = 3u << 20, packed_len;
    uint8_t *noise = data_file("noise", len, 0, 13);
    uint8_t *packed = bzip2_packed(c, noise, len, &packed_len);
    int in = gpucomp_memfd_create("in"), out = gpucomp_memfd_create("out");
    ck_assert(in >= 0 && out >= 0);
    ck_assert_int_eq(pwrite(in, packed, packed_len, 0), (ssize_t)packed_len);
    ck_assert_int_eq(fcntl(out, F_ADD_SEALS, F_SEAL_GROW), 0);
    gpucomp_options o;
    gpucomp_options_init(&o, GPUCOMP_CODEC_BZIP2);
    size_t back_len = 0;
    int rc = gpucomp_decompress_fd(c, &o, in, packed_len, out, &back_len);
    ck_assert_int_eq(rc, GPUCOMP_E_INVALID);
    ck_assert_msg(strstr(gpucomp_last_error(c), "output memfd"), "message: %s", gpucomp_last_error(c));
    ck_assert_int_eq(gpucomp_ping(c), GPUCOMP_OK);
    bzip2_decompress_buffer(c, packed, packed_len, noise, len); /* the next request is served */
    ck_assert_uint_eq(await_memory_released(c), 0);
    close(in), close(out);
    gpucomp_free(packed);
    free(noise);
    gpucomp_close(c);
}
END_TEST

/*
 * A bzip2 decompress has a break-even of its own, by default 8 MiB of compressed
 * input, twice a compress's 4 MiB (the device's decoder has a larger fixed cost):
 * a 6 MiB compress goes to the device, its 6 MiB stream's decompress stays on
 * the CPU engine, and two such streams back to back (12 MiB) go to the device.
 */
START_TEST(test_bzip2_decompress_break_even_of_its_own)
{
    start_emulated("emulate"); /* --gpu-min-bytes 1M; bzip2's settings at their defaults */
    gpucomp_client *c = connect_or_fail();
    size_t len = 6u << 20, packed_len;
    uint8_t *noise = malloc(len);
    ck_assert_ptr_nonnull(noise);
    fill_test_data(noise, len, 0, 21); /* incompressible: the stream is about 6 MiB too */
    uint8_t *packed = bzip2_packed(c, noise, len, &packed_len);
    ck_assert_int_eq(gpucomp_last_backend(c), GPUCOMP_BACKEND_GPU); /* 6 MiB >= 4 MiB */
    ck_assert_uint_gt(packed_len, 4u << 20);
    ck_assert_uint_lt(packed_len, 8u << 20);
    /* Above the compress break-even, below the decompress one: the CPU engine. */
    bzip2_decompress_buffer(c, packed, packed_len, noise, len);
    ck_assert_int_eq(gpucomp_last_backend(c), GPUCOMP_BACKEND_CPU);
    ck_assert_int_eq(bzip2_decompress_fd(c, packed, packed_len, 0, noise, len), GPUCOMP_OK);
    ck_assert_int_eq(gpucomp_last_backend(c), GPUCOMP_BACKEND_CPU);
    /* Two streams back to back, over 8 MiB: the device. */
    uint8_t *two = malloc(2 * packed_len), *twice = malloc(2 * len);
    ck_assert(two && twice);
    memcpy(two, packed, packed_len), memcpy(two + packed_len, packed, packed_len);
    memcpy(twice, noise, len), memcpy(twice + len, noise, len);
    bzip2_decompress_buffer(c, two, 2 * packed_len, twice, 2 * len);
    ck_assert_int_eq(gpucomp_last_backend(c), GPUCOMP_BACKEND_GPU);
    gpucomp_stats st;
    ck_assert_int_eq(gpucomp_stats_get(c, &st), GPUCOMP_OK);
    ck_assert_uint_eq(st.devices[0].requests, 2); /* the compress and the 12 MiB decompress */
    ck_assert_uint_eq(st.devices[0].bytes_in, len + 2 * packed_len);
    ck_assert_uint_eq(st.devices[0].fallbacks, 0);
    ck_assert_uint_eq(st.gpu_requests, 2);
    ck_assert_uint_eq(st.cpu_requests, 2);
    ck_assert_uint_eq(st.requests_failed, 0);
    ck_assert_str_eq(st.routing[1], "bzip2: gpu from 4194304 bytes (compress), 8388608 (decompress), else cpu");
    free(two), free(twice);
    gpucomp_free(packed);
    free(noise);
    gpucomp_close(c);
}
END_TEST

/*
 * --gpu-min-bytes-bzip2-decompress sets it, from the config file as from the
 * command line: at 3 MiB (compress at 1 MiB), a 2 MiB compress goes to the
 * device, its 2 MiB stream's decompress stays on the CPU engine, and two such
 * streams (4 MiB) go to the device.
 */
START_TEST(test_bzip2_decompress_break_even_setting)
{
    char conf[] = "/tmp/check_scheduler_conf.XXXXXX";
    int fd = mkstemp(conf);
    ck_assert_int_ge(fd, 0);
    const char text[] = "gpu-min-bytes-bzip2 = 1M\ngpu-min-bytes-bzip2-decompress = 3M\n";
    ck_assert_int_eq(write(fd, text, sizeof text - 1), (ssize_t)(sizeof text - 1));
    close(fd);
    char config_arg[64];
    snprintf(config_arg, sizeof config_arg, "--config=%s", conf);
    const char *args[] = { "--gpu",          "emulate", "--gpu-min-bytes", "1M", "--batch-wait-us", "1000",
                           "--device-lanes", "1",       config_arg,        NULL };
    test_daemon_start(&dut, args);
    unlink(conf);
    gpucomp_client *c = connect_or_fail();
    size_t len = 2u << 20, packed_len;
    uint8_t *noise = malloc(len);
    ck_assert_ptr_nonnull(noise);
    fill_test_data(noise, len, 0, 22);
    uint8_t *packed = bzip2_packed(c, noise, len, &packed_len);
    ck_assert_int_eq(gpucomp_last_backend(c), GPUCOMP_BACKEND_GPU);
    ck_assert_uint_gt(packed_len, 1u << 20);
    ck_assert_uint_lt(packed_len, 3u << 20);
    bzip2_decompress_buffer(c, packed, packed_len, noise, len);
    ck_assert_int_eq(gpucomp_last_backend(c), GPUCOMP_BACKEND_CPU);
    uint8_t *two = malloc(2 * packed_len), *twice = malloc(2 * len);
    ck_assert(two && twice);
    memcpy(two, packed, packed_len), memcpy(two + packed_len, packed, packed_len);
    memcpy(twice, noise, len), memcpy(twice + len, noise, len);
    ck_assert_int_eq(bzip2_decompress_fd(c, two, 2 * packed_len, 0, twice, 2 * len), GPUCOMP_OK);
    ck_assert_int_eq(gpucomp_last_backend(c), GPUCOMP_BACKEND_GPU);
    gpucomp_stats st;
    ck_assert_int_eq(gpucomp_stats_get(c, &st), GPUCOMP_OK);
    ck_assert_uint_eq(st.devices[0].requests, 2);
    ck_assert_uint_eq(st.cpu_requests, 1);
    ck_assert_str_eq(st.routing[1], "bzip2: gpu from 1048576 bytes (compress), 3145728 (decompress), else cpu");
    free(two), free(twice);
    gpucomp_free(packed);
    free(noise);
    gpucomp_close(c);
}
END_TEST

/* The daemon's log (capture_log), read whole; caller frees. */
static char *daemon_log(void)
{
    size_t n;
    uint8_t *log = read_file(dut.log_path, &n);
    ck_assert_ptr_nonnull(log);
    char *text = malloc(n + 1);
    memcpy(text, log, n);
    text[n] = 0;
    free(log);
    return text;
}

/*
 * A decompress the device fails (--gpu=emulate-limit fails every bzip2
 * decompress with GC_E_CORRUPT once it has decoded it) reruns on the CPU
 * engine and succeeds there, through the socket and through a memfd; the
 * device stays in service. Through the socket, 8 MiB of budget holds the
 * 3 MiB stream and the device's 4 MiB output, or the stream and the CPU
 * engine's 4 MiB, not all three: the rerun fits only if the device's output
 * and its charge were given back first.
 */
START_TEST(test_bzip2_decompress_device_failure_reruns_on_cpu)
{
    const char *budget[] = {
        "--memory-budget", "8M", "--user-memory-share", "100", "--log-level", "info", NULL
    }; /* the lane logs each request handed back */
    dut.capture_log = 1;
    start_bzip2_routing("emulate-limit", budget);
    ck_assert_int_eq(setenv("GPUCOMP_MEMFD_THRESHOLD", "1G", 1), 0); /* the input through the socket */
    gpucomp_client *sock = connect_or_fail();
    ck_assert_int_eq(unsetenv("GPUCOMP_MEMFD_THRESHOLD"), 0);
    size_t len = 3u << 20, packed_len;
    uint8_t *noise = data_file("noise", len, 0, 17);
    uint8_t *packed = bzip2_packed(sock, noise, len, &packed_len); /* handed back too: CPU */
    ck_assert_uint_gt(packed_len, 2u << 20);
    bzip2_decompress_buffer(sock, packed, packed_len, noise, len);
    ck_assert_int_eq(gpucomp_last_backend(sock), GPUCOMP_BACKEND_CPU);
    gpucomp_close(sock);
    gpucomp_client *c = connect_or_fail();
    ck_assert_uint_eq(await_memory_released(c), 0);
    ck_assert_int_eq(bzip2_decompress_fd(c, packed, packed_len, 0, noise, len), GPUCOMP_OK);
    ck_assert_int_eq(gpucomp_last_backend(c), GPUCOMP_BACKEND_CPU);
    gpucomp_stats st;
    ck_assert_int_eq(gpucomp_stats_get(c, &st), GPUCOMP_OK);
    ck_assert_uint_eq(st.requests_failed, 0);
    ck_assert_uint_eq(st.devices[0].fallbacks, 3); /* the compress and both decompresses */
    ck_assert_uint_eq(st.devices[0].requests, 0);
    ck_assert_int_eq(st.devices[0].retired, 0);
    ck_assert_str_eq(st.backend, "gpu");
    ck_assert_uint_eq(await_memory_released(c), 0);
    char *log = daemon_log();
    ck_assert_msg(strstr(log, "refused the stream after decoding it") != NULL, "the device did not decode: %s",
                  log);
    free(log);
    gpucomp_free(packed);
    free(noise);
    gpucomp_close(c);
}
END_TEST

/*
 * A corrupt stream the device fails gets the CPU engine's exact verdict,
 * status and message, not the device's own words (the emulated device's
 * read "emulated device"): the same as `gpucomp --local` says of the file.
 */
START_TEST(test_bzip2_corrupt_stream_gets_cpu_verdict)
{
    start_bzip2_routing("emulate", NULL);
    gpucomp_client *c = connect_or_fail();
    size_t len = 3u << 20, packed_len;
    uint8_t *noise = data_file("noise", len, 0, 18);
    uint8_t *packed = bzip2_packed(c, noise, len, &packed_len);
    packed[packed_len / 2] ^= 0x55; /* inside a block */
    char path[160];
    snprintf(path, sizeof path, "%s/corrupt.bz2", dut.dir);
    ck_assert_int_eq(write_file(path, packed, packed_len), 0);
    gpucomp_options o;
    gpucomp_options_init(&o, GPUCOMP_CODEC_BZIP2);
    void *back;
    size_t back_len;
    int rc = gpucomp_decompress(c, &o, packed, packed_len, &back, &back_len);
    ck_assert_int_ne(rc, GPUCOMP_OK);
    char msg[512];
    snprintf(msg, sizeof msg, "%s", gpucomp_last_error(c));
    ck_assert_msg(strstr(msg, "emulated device") == NULL, "the device's verdict reached the client: %s", msg);
    ck_assert_int_eq(bzip2_decompress_fd(c, packed, packed_len, 0, NULL, 0), rc);
    ck_assert_str_eq(gpucomp_last_error(c), msg);
    /* The CPU engine's own words for the file, in this process's CLI. */
    const char *cli = getenv("GPUCOMP");
    ck_assert_msg(cli != NULL, "GPUCOMP (path of the CLI) is not set");
    run_shell("'%s' --local -d -c %s >/dev/null 2>%s/cpu.err", cli, path, dut.dir);
    snprintf(path, sizeof path, "%s/cpu.err", dut.dir);
    size_t n;
    uint8_t *err = read_file(path, &n);
    ck_assert_ptr_nonnull(err);
    char *text = calloc(1, n + 1);
    memcpy(text, err, n);
    ck_assert_msg(strstr(text, msg) != NULL, "the CPU engine says \"%s\", the daemon \"%s\"", text, msg);
    free(text), free(err);
    gpucomp_stats st;
    ck_assert_int_eq(gpucomp_stats_get(c, &st), GPUCOMP_OK);
    ck_assert_uint_eq(st.devices[0].fallbacks, 2);
    ck_assert_uint_eq(st.requests_failed, 2);
    ck_assert_uint_eq(await_memory_released(c), 0);
    gpucomp_free(packed);
    free(noise);
    gpucomp_close(c);
}
END_TEST

/*
 * max_output holds on the device: the device's output stops growing at the
 * request's limit (the codec's grow), the request reruns on the CPU engine
 * and fails there with its GC_E_LIMIT and message, through the socket and a
 * memfd; nothing stays charged.
 */
START_TEST(test_bzip2_decompress_max_output_on_device)
{
    const char *info[] = { "--log-level", "info", NULL }; /* the lane logs each request handed back */
    dut.capture_log = 1;
    start_bzip2_routing("emulate", info);
    gpucomp_client *c = connect_or_fail();
    size_t len = 3u << 20, packed_len, limit = 5u << 19; /* 2.5 MiB */
    uint8_t *noise = data_file("noise", len, 0, 19);
    uint8_t *packed = bzip2_packed(c, noise, len, &packed_len);
    gpucomp_options o;
    gpucomp_options_init(&o, GPUCOMP_CODEC_BZIP2);
    o.max_output = limit;
    void *back;
    size_t back_len;
    ck_assert_int_eq(gpucomp_decompress(c, &o, packed, packed_len, &back, &back_len), GPUCOMP_E_LIMIT);
    /* The CPU engine's words (the library's own check of a response over the limit says otherwise). */
    ck_assert_msg(strstr(gpucomp_last_error(c), "decompressed size exceeds the 2621440 byte limit") &&
                      strncmp(gpucomp_last_error(c), "bzip2: stream 1 block ", 22) == 0,
                  "not the CPU engine's message: %s", gpucomp_last_error(c));
    ck_assert_int_eq(bzip2_decompress_fd(c, packed, packed_len, limit, NULL, 0), GPUCOMP_E_LIMIT);
    ck_assert_ptr_nonnull(strstr(gpucomp_last_error(c), "decompressed size exceeds the 2621440 byte limit"));
    /* At the limit exactly, it is served by the device. */
    ck_assert_int_eq(bzip2_decompress_fd(c, packed, packed_len, len, noise, len), GPUCOMP_OK);
    ck_assert_int_eq(gpucomp_last_backend(c), GPUCOMP_BACKEND_GPU);
    gpucomp_stats st;
    ck_assert_int_eq(gpucomp_stats_get(c, &st), GPUCOMP_OK);
    ck_assert_uint_eq(st.requests_failed, 2); /* the daemon's answers, not the library's */
    ck_assert_uint_eq(st.devices[0].fallbacks, 2);
    ck_assert_uint_eq(st.devices[0].requests, 2); /* the compress and the decompress at the limit */
    ck_assert_uint_eq(await_memory_released(c), 0);
    char *log = daemon_log();
    ck_assert_msg(strstr(log, "handed a request back (bzip2: decompressed size exceeds the 2621440 byte "
                              "limit)"),
                  "the device did not stop at the limit: %s", log);
    free(log);
    gpucomp_free(packed);
    free(noise);
    gpucomp_close(c);
}
END_TEST

/*
 * A compress the device hands back with GC_E_LIMIT (a bzip2 stream over
 * gc_gpu_bzip2_encode_cap; the emulated device says it of every compress)
 * reruns on the CPU engine: same stream, no failure, the device stays in
 * service. Through the socket, 7 MiB of budget holds the 3 MiB input and the
 * device's 3.2 MiB buffer, or the input and the CPU engine's 3 MiB stream,
 * not all three: the rerun fits only if the device's buffer and its charge
 * were given back first.
 */
START_TEST(test_device_limit_reruns_on_cpu)
{
    const char *budget[] = { "--memory-budget", "7M", "--user-memory-share", "100", NULL };
    start_bzip2_routing("emulate-limit", budget);
    ck_assert_int_eq(setenv("GPUCOMP_MEMFD_THRESHOLD", "1G", 1), 0); /* the input through the socket */
    gpucomp_client *sock = connect_or_fail();
    ck_assert_int_eq(unsetenv("GPUCOMP_MEMFD_THRESHOLD"), 0);
    size_t len = 3u << 20;
    uint8_t *noise = data_file("noise", len, 0, 14); /* incompressible: about 3 MiB out */
    ck_assert_int_eq(bzip2_compress(sock, 7, "noise", noise, len), GPUCOMP_BACKEND_CPU);
    gpucomp_close(sock);
    gpucomp_client *c = connect_or_fail();
    ck_assert_uint_eq(await_memory_released(c), 0);
    /* The memfd transport: the device's output was the client's memfd, sized for it. */
    int in = gpucomp_memfd_create("in"), out = gpucomp_memfd_create("out");
    ck_assert(in >= 0 && out >= 0);
    ck_assert_int_eq(pwrite(in, noise, len, 0), (ssize_t)len);
    gpucomp_options o;
    gpucomp_options_init(&o, GPUCOMP_CODEC_BZIP2);
    o.level = 7;
    size_t packed_len;
    ck_assert_msg(gpucomp_compress_fd(c, &o, in, len, out, &packed_len) == GPUCOMP_OK, "compress_fd: %s",
                  gpucomp_last_error(c));
    ck_assert_int_eq(gpucomp_last_backend(c), GPUCOMP_BACKEND_CPU);
    uint8_t *packed = malloc(packed_len);
    ck_assert_int_eq(pread(out, packed, packed_len, 0), (ssize_t)packed_len);
    assert_cpu_engine_stream("noise", 7, packed, packed_len);
    free(packed);
    close(in), close(out);
    /* Codec-neutral: an rle compress is handed back too; its decompress the device serves. */
    ck_assert_int_eq(round_trip(c, GPUCOMP_CODEC_RLE, 2u << 20, 15), GPUCOMP_BACKEND_CPU);
    gpucomp_stats st;
    ck_assert_int_eq(gpucomp_stats_get(c, &st), GPUCOMP_OK);
    ck_assert_uint_eq(st.requests_failed, 0);
    ck_assert_uint_eq(st.devices[0].fallbacks, 3);
    ck_assert_uint_eq(st.devices[0].requests, 1); /* the rle decompress */
    ck_assert_uint_eq(st.devices[0].batches, 4);
    ck_assert_int_eq(st.devices[0].retired, 0);
    ck_assert_str_eq(st.backend, "gpu");
    ck_assert_uint_eq(st.gpu_requests, 1);
    ck_assert_uint_eq(st.cpu_requests, 3);
    ck_assert_uint_eq(await_memory_released(c), 0);
    free(noise);
    gpucomp_close(c);
}
END_TEST

/*
 * Compress in (holding src, len bytes) into packed and decompress that into
 * back through the memfd transport, asserting back holds src. Returns the
 * compressed size.
 */
static size_t fd_round_trip(gpucomp_client *c, const gpucomp_options *o, int in, const uint8_t *src, size_t len,
                            int packed, int back)
{
    size_t packed_len, back_len;
    ck_assert_int_eq(gpucomp_compress_fd(c, o, in, len, packed, &packed_len), GPUCOMP_OK);
    ck_assert_int_eq(gpucomp_decompress_fd(c, o, packed, packed_len, back, &back_len), GPUCOMP_OK);
    ck_assert_uint_eq(back_len, len);
    uint8_t *out = mmap(NULL, len, PROT_READ, MAP_SHARED, back, 0);
    ck_assert(out != MAP_FAILED);
    ck_assert(memcmp(out, src, len) == 0);
    munmap(out, len);
    return packed_len;
}

START_TEST(test_memfd_transport)
{
    start_emulated("off");
    gpucomp_client *c = connect_or_fail();
    size_t len = 3u << 20;
    int in = gpucomp_memfd_create("in"), packed = gpucomp_memfd_create("packed");
    int back = gpucomp_memfd_create("back");
    ck_assert(in >= 0 && packed >= 0 && back >= 0);
    ck_assert_int_eq(ftruncate(in, (off_t)len), 0);
    uint8_t *src = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, in, 0);
    ck_assert(src != MAP_FAILED);
    fill_test_data(src, len, 1, 5);
    gpucomp_options o;
    gpucomp_options_init(&o, GPUCOMP_CODEC_RLE);
    ck_assert_uint_lt(fd_round_trip(c, &o, in, src, len, packed, back), len);
    /* the daemon sealed the input: the client can no longer shrink it under the daemon */
    ck_assert_int_ne(ftruncate(in, 0), 0);
    /* bzip2 through the same transport */
    o.codec = GPUCOMP_CODEC_BZIP2;
    int packed2 = gpucomp_memfd_create("packed2");
    fd_round_trip(c, &o, in, src, len, packed2, back);
    munmap(src, len);
    close(in), close(packed), close(back), close(packed2);
    gpucomp_close(c);
}
END_TEST

/* A refused fd request must not leave its descriptors for the next one. */
START_TEST(test_memfd_refused_request_keeps_fds_in_step)
{
    start_emulated("off");
    gpucomp_client *c = connect_or_fail();
    size_t len = 1u << 20;
    int in = gpucomp_memfd_create("in"), out = gpucomp_memfd_create("out");
    int in2 = gpucomp_memfd_create("in2"), out2 = gpucomp_memfd_create("out2");
    uint8_t *data = malloc(len);
    fill_test_data(data, len, 1, 77);
    ck_assert_int_eq(pwrite(in, "not this one", 12, 0), 12);
    ck_assert_int_eq(pwrite(in2, data, len, 0), (ssize_t)len);
    gpucomp_options bad;
    gpucomp_options_init(&bad, GPUCOMP_CODEC_BZIP2);
    bad.level = 12; /* the daemon refuses it after the descriptors arrived */
    size_t out_len;
    ck_assert_int_eq(gpucomp_compress_fd(c, &bad, in, 12, out, &out_len), GPUCOMP_E_INVALID);
    gpucomp_options o;
    gpucomp_options_init(&o, GPUCOMP_CODEC_RLE);
    ck_assert_int_eq(gpucomp_compress_fd(c, &o, in2, len, out2, &out_len), GPUCOMP_OK);
    uint8_t *frame = malloc(out_len);
    ck_assert_int_eq(pread(out2, frame, out_len, 0), (ssize_t)out_len);
    void *back;
    size_t back_len;
    ck_assert_int_eq(gpucomp_decompress(c, &o, frame, out_len, &back, &back_len), GPUCOMP_OK);
    ck_assert_uint_eq(back_len, len);
    ck_assert(memcmp(back, data, len) == 0); /* in2's data, not in's */
    gpucomp_free(back);
    free(frame);
    free(data);
    close(in), close(out), close(in2), close(out2);
    gpucomp_close(c);
}
END_TEST

START_TEST(test_memfd_refuses_unsealable_fd)
{
    start_emulated("off");
    gpucomp_client *c = connect_or_fail();
    char path[128];
    snprintf(path, sizeof path, "%s/plain", dut.dir);
    ck_assert_int_eq(write_file(path, "hello world", 11), 0);
    int in = open(path, O_RDWR), out = gpucomp_memfd_create("out");
    gpucomp_options o;
    gpucomp_options_init(&o, GPUCOMP_CODEC_RLE);
    size_t out_len;
    ck_assert_int_eq(gpucomp_compress_fd(c, &o, in, 11, out, &out_len), GPUCOMP_E_INVALID);
    ck_assert_ptr_nonnull(strstr(gpucomp_last_error(c), "seal"));
    ck_assert_int_eq(gpucomp_ping(c), GPUCOMP_OK);
    close(in), close(out);
    gpucomp_close(c);
}
END_TEST

/* ---- registered buffers (gpucomp_register_fd) ----------------------------- */

static void start_with_register_limit(const char *limit)
{
    const char *args[] = { "--gpu",
                           "emulate",
                           "--gpu-min-bytes",
                           "1M",
                           "--batch-wait-us",
                           "1000",
                           "--device-lanes",
                           "1",
                           "--register-limit",
                           limit,
                           NULL };
    test_daemon_start(&dut, args);
}

static uint64_t registered_bytes(gpucomp_client *c)
{
    gpucomp_stats st;
    ck_assert_int_eq(gpucomp_stats_get(c, &st), GPUCOMP_OK);
    return st.registered_bytes;
}

/* A memfd of len bytes of test data, mapped at *map. */
static int data_memfd(size_t len, uint64_t seed, uint8_t **map)
{
    int fd = gpucomp_memfd_create("data");
    ck_assert(fd >= 0);
    ck_assert_int_eq(ftruncate(fd, (off_t)len), 0);
    *map = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    ck_assert(*map != MAP_FAILED);
    fill_test_data(*map, len, 1, seed);
    return fd;
}

START_TEST(test_registered_buffers_round_trip)
{
    start_with_register_limit("64M");
    gpucomp_client *c = connect_or_fail();
    size_t len = 3u << 20;
    uint8_t *src;
    int in = data_memfd(len, 9, &src);
    int packed = gpucomp_memfd_create("packed"), back = gpucomp_memfd_create("back");
    gpucomp_options o;
    gpucomp_options_init(&o, GPUCOMP_CODEC_RLE);
    fd_round_trip(c, &o, in, src, len, packed, back); /* sizes packed and back */
    struct stat st;
    ck_assert_int_eq(fstat(packed, &st), 0);
    int pinned = -1;
    ck_assert_int_eq(gpucomp_register_fd(c, in, len, &pinned), GPUCOMP_OK);
    ck_assert_int_eq(pinned, 1); /* the emulated device "pins" registered buffers */
    ck_assert_int_eq(gpucomp_register_fd(c, packed, (size_t)st.st_size, NULL), GPUCOMP_OK);
    ck_assert_int_eq(gpucomp_register_fd(c, back, len, NULL), GPUCOMP_OK);
    ck_assert_uint_eq(registered_bytes(c), 2 * len + (uint64_t)st.st_size);
    ck_assert_int_eq(gpucomp_register_fd(c, in, len / 2, NULL), GPUCOMP_OK); /* already fits */
    ck_assert_uint_eq(registered_bytes(c), 2 * len + (uint64_t)st.st_size);
    for (int round = 0; round < 3; round++) { /* new data each round, same registered files */
        fill_test_data(src, len, 1, 100 + (uint64_t)round);
        fd_round_trip(c, &o, in, src, len, packed, back);
    }
    ck_assert_int_eq(gpucomp_unregister_fd(c, packed), GPUCOMP_OK);
    ck_assert_uint_eq(registered_bytes(c), 2 * len);
    ck_assert_int_eq(gpucomp_unregister_fd(c, packed), GPUCOMP_E_INVALID);
    ck_assert_ptr_nonnull(strstr(gpucomp_last_error(c), "not registered"));
    fd_round_trip(c, &o, in, src, len, packed, back); /* unregistered output still works */
    ck_assert_int_eq(gpucomp_ping(c), GPUCOMP_OK);
    munmap(src, len);
    close(in), close(packed), close(back);
    gpucomp_close(c);
}
END_TEST

START_TEST(test_register_limit_enforced)
{
    start_with_register_limit("1M");
    gpucomp_client *c = connect_or_fail();
    uint8_t *a_map, *b_map;
    int a = data_memfd(2u << 20, 1, &a_map), b = data_memfd(768u << 10, 2, &b_map);
    ck_assert_int_eq(gpucomp_register_fd(c, a, 2u << 20, NULL), GPUCOMP_E_LIMIT);
    ck_assert_ptr_nonnull(strstr(gpucomp_last_error(c), "limit"));
    ck_assert_int_eq(gpucomp_register_fd(c, a, 512u << 10, NULL), GPUCOMP_OK);
    ck_assert_int_eq(gpucomp_register_fd(c, b, 768u << 10, NULL), GPUCOMP_E_LIMIT);
    gpucomp_stats st;
    ck_assert_int_eq(gpucomp_stats_get(c, &st), GPUCOMP_OK);
    ck_assert_uint_eq(st.registered_bytes, 512u << 10);
    ck_assert_uint_eq(st.register_limit, 1u << 20);
    /* growing a registration is registering it again: still bounded */
    ck_assert_int_eq(gpucomp_register_fd(c, a, 2u << 20, NULL), GPUCOMP_E_LIMIT);
    ck_assert_int_eq(gpucomp_unregister_fd(c, a), GPUCOMP_OK);
    ck_assert_int_eq(gpucomp_register_fd(c, b, 768u << 10, NULL), GPUCOMP_OK);
    munmap(a_map, 2u << 20), munmap(b_map, 768u << 10);
    close(a), close(b);
    gpucomp_close(c);
}
END_TEST

START_TEST(test_register_refuses_bad_descriptors)
{
    start_with_register_limit("64M");
    gpucomp_client *c = connect_or_fail();
    ck_assert_int_eq(gpucomp_register_fd(c, -1, 10, NULL), GPUCOMP_E_INVALID);
    uint8_t *map;
    int fd = data_memfd(4096, 3, &map);
    ck_assert_int_eq(gpucomp_register_fd(c, fd, 0, NULL), GPUCOMP_E_INVALID);
    ck_assert_int_eq(gpucomp_register_fd(c, fd, 8192, NULL), GPUCOMP_E_INVALID); /* past its end */
    ck_assert_int_eq(gpucomp_unregister_fd(c, fd), GPUCOMP_E_INVALID);
    char path[128];
    snprintf(path, sizeof path, "%s/plain", dut.dir);
    ck_assert_int_eq(write_file(path, "hello world", 11), 0);
    int plain = open(path, O_RDWR);
    ck_assert_int_eq(gpucomp_register_fd(c, plain, 11, NULL), GPUCOMP_E_INVALID);
    ck_assert_ptr_nonnull(strstr(gpucomp_last_error(c), "seal"));
    /* another connection cannot take over or end c's registration */
    ck_assert_int_eq(gpucomp_register_fd(c, fd, 4096, NULL), GPUCOMP_OK);
    gpucomp_client *other = connect_or_fail();
    ck_assert_int_eq(gpucomp_register_fd(other, fd, 4096, NULL), GPUCOMP_E_INVALID);
    ck_assert_int_eq(gpucomp_unregister_fd(other, fd), GPUCOMP_E_INVALID);
    ck_assert_uint_eq(registered_bytes(other), 4096);
    ck_assert_int_eq(gpucomp_ping(c), GPUCOMP_OK);
    gpucomp_close(other);
    munmap(map, 4096);
    close(fd), close(plain);
    gpucomp_close(c);
}
END_TEST

/* Without a device nothing is pinned: registration only keeps the mapping. */
START_TEST(test_register_without_device_maps_only)
{
    const char *args[] = { "--gpu", "off", NULL };
    test_daemon_start(&dut, args);
    gpucomp_client *c = connect_or_fail();
    uint8_t *map;
    int fd = data_memfd(1u << 20, 6, &map);
    int pinned = -1;
    ck_assert_int_eq(gpucomp_register_fd(c, fd, 1u << 20, &pinned), GPUCOMP_OK);
    ck_assert_int_eq(pinned, 0);
    ck_assert_uint_eq(registered_bytes(c), 1u << 20);
    munmap(map, 1u << 20);
    close(fd);
    gpucomp_close(c);
}
END_TEST

/* Wait until the daemon reports `want` registered bytes (connection closes are noticed asynchronously). */
static uint64_t await_registered(gpucomp_client *watcher, uint64_t want)
{
    uint64_t now = registered_bytes(watcher);
    for (int i = 0; i < 500 && now != want; i++) {
        usleep(10000);
        now = registered_bytes(watcher);
    }
    return now;
}

/* Registrations end with their connection (the daemon notices the close asynchronously). */
START_TEST(test_registration_ends_with_connection)
{
    start_with_register_limit("64M");
    gpucomp_client *c = connect_or_fail(), *watcher = connect_or_fail();
    uint8_t *map;
    int fd = data_memfd(1u << 20, 4, &map);
    ck_assert_int_eq(gpucomp_register_fd(c, fd, 1u << 20, NULL), GPUCOMP_OK);
    ck_assert_uint_eq(registered_bytes(watcher), 1u << 20);
    gpucomp_close(c);
    ck_assert_uint_eq(await_registered(watcher, 0), 0);
    munmap(map, 1u << 20);
    close(fd);
    gpucomp_close(watcher);
}
END_TEST

/* Raw frames the library never sends: a registration without its descriptor. */
START_TEST(test_register_without_descriptor_is_protocol_error)
{
    start_with_register_limit("64M");
    int fd = raw_connect(dut.socket_path);
    ck_assert_int_ge(fd, 0);
    Gpucomp__Frame *w = raw_hello(fd, GPUCOMP__PROTOCOL_VERSION__PROTOCOL_VERSION_CURRENT);
    ck_assert_ptr_nonnull(w);
    gpucomp__frame__free_unpacked(w, NULL);
    for (int with_flag = 0; with_flag < 2; with_flag++) {
        Gpucomp__Request r = GPUCOMP__REQUEST__INIT;
        r.id = 7 + (uint64_t)with_flag;
        r.op = GPUCOMP__OP__OP_REGISTER;
        r.total_size = 4096;
        r.last = 1;
        r.payload_in_fd = with_flag; /* flag set, but no descriptor attached */
        raw_send_request(fd, &r);
        Gpucomp__Frame *f = raw_recv(fd, 1u << 20);
        ck_assert_ptr_nonnull(f);
        ck_assert_int_eq(f->body_case, GPUCOMP__FRAME__BODY_RESPONSE);
        ck_assert_uint_eq(f->response->id, r.id);
        ck_assert_int_eq(f->response->status, GPUCOMP__STATUS__STATUS_PROTOCOL);
        ck_assert_ptr_nonnull(strstr(f->response->message, "one memfd"));
        gpucomp__frame__free_unpacked(f, NULL);
    }
    close(fd);
}
END_TEST

/* rle compress of len bytes of fill_test_data(kind 1, seed) through c with width and chunk size. */
static uint8_t *rle_packed(gpucomp_client *c, const uint8_t *data, size_t len, unsigned width, uint32_t chunk,
                           size_t *packed_len)
{
    gpucomp_options o;
    gpucomp_options_init(&o, GPUCOMP_CODEC_RLE);
    o.element_width = width;
    o.chunk_size = chunk;
    void *packed;
    int rc = gpucomp_compress(c, &o, data, len, &packed, packed_len);
    ck_assert_msg(rc == GPUCOMP_OK, "compress: %s", gpucomp_last_error(c));
    return packed;
}

/* Decompress in[0..in_len) through c; it must give want[0..want_len). */
static void rle_unpacks_to(gpucomp_client *c, const uint8_t *in, size_t in_len, const uint8_t *want,
                           size_t want_len)
{
    gpucomp_options o;
    gpucomp_options_init(&o, GPUCOMP_CODEC_RLE);
    void *out;
    size_t out_len;
    int rc = gpucomp_decompress(c, &o, in, in_len, &out, &out_len);
    ck_assert_msg(rc == GPUCOMP_OK, "decompress: %s", gpucomp_last_error(c));
    ck_assert_uint_eq(out_len, want_len);
    ck_assert(memcmp(out, want, want_len) == 0);
    gpucomp_free(out);
}

/*
 * rle frames back to back (a stream compressed in parts: docs/FORMAT.md,
 * "Concatenated frames") decode to the concatenation of their outputs. The
 * device decoder takes one frame per job, so such a decompress runs on the
 * CPU engine, while one frame of the same size goes to the device.
 */
START_TEST(test_rle_concatenated_frames_run_on_cpu)
{
    start_emulated("emulate"); /* rle to the device from 1 MiB */
    gpucomp_client *c = connect_or_fail();
    size_t a_len = 2u << 20, b_len = (3u << 20) + 5, a_packed, b_packed;
    uint8_t *data = malloc(a_len + b_len);
    ck_assert_ptr_nonnull(data);
    fill_test_data(data, a_len, 1, 41);
    fill_test_data(data + a_len, b_len, 1, 42);
    uint8_t *a = rle_packed(c, data, a_len, 1, 0, &a_packed);
    ck_assert_int_eq(gpucomp_last_backend(c), GPUCOMP_BACKEND_GPU);
    uint8_t *b = rle_packed(c, data + a_len, b_len, 4, 256u << 10, &b_packed);
    ck_assert_int_eq(gpucomp_last_backend(c), GPUCOMP_BACKEND_GPU);
    uint8_t *two = malloc(a_packed + b_packed + 4);
    ck_assert_ptr_nonnull(two);
    memcpy(two, a, a_packed);
    memcpy(two + a_packed, b, b_packed);
    /* one frame: the device */
    rle_unpacks_to(c, a, a_packed, data, a_len);
    ck_assert_int_eq(gpucomp_last_backend(c), GPUCOMP_BACKEND_GPU);
    /* two frames: the concatenation, from the CPU engine */
    rle_unpacks_to(c, two, a_packed + b_packed, data, a_len + b_len);
    ck_assert_int_eq(gpucomp_last_backend(c), GPUCOMP_BACKEND_CPU);
    /* a frame and garbage: the CPU engine's verdict, naming the second frame */
    memcpy(two + a_packed, "junk", 4);
    gpucomp_options o;
    gpucomp_options_init(&o, GPUCOMP_CODEC_RLE);
    void *out = NULL;
    size_t out_len;
    ck_assert_int_eq(gpucomp_decompress(c, &o, two, a_packed + 4, &out, &out_len), GPUCOMP_E_CORRUPT);
    ck_assert_msg(strstr(gpucomp_last_error(c), "frame 2") != NULL, "%s", gpucomp_last_error(c));
    gpucomp_stats st;
    ck_assert_int_eq(gpucomp_stats_get(c, &st), GPUCOMP_OK);
    ck_assert_uint_eq(st.devices[0].requests, 3); /* the two compresses and the one-frame decompress */
    gpucomp_free(a);
    gpucomp_free(b);
    free(two);
    free(data);
    gpucomp_close(c);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("scheduler");
    TCase *tc = tcase_create("emulated-device");
    tcase_add_checked_fixture(tc, NULL, teardown);
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, test_routing_by_size_and_codec);
    tcase_add_test(tc, test_routing_without_a_device);
    tcase_add_test(tc, test_concurrent_requests_are_batched);
    tcase_add_test(tc, test_two_lanes_share_the_work);
    tcase_add_test(tc, test_device_failure_falls_back_to_cpu);
    tcase_add_test(tc, test_devices_share_the_work);
    tcase_add_test(tc, test_failed_device_retired_others_serve);
    tcase_add_test(tc, test_stats_show_load_per_device);
    tcase_add_test(tc, test_stats_name_gpus_and_lanes);
    tcase_add_test(tc, test_idle_gpus_are_filled_before_second_lanes);
    tcase_add_test(tc, test_lone_small_request_stays_on_cpu);
    tcase_add_test(tc, test_small_requests_go_to_idle_lane_when_cpus_busy);
    tcase_add_test(tc, test_small_requests_go_to_idle_lane_when_cpu_queued);
    tcase_add_test(tc, test_small_requests_declined_by_lane_rerun_on_cpu);
    tcase_add_test(tc, test_injected_failure_retires_that_device_only);
    tcase_add_test(tc, test_injected_failure_of_one_lane);
    tcase_add_test(tc, test_queued_work_of_a_failed_device_moves_on);
    tcase_add_test(tc, test_vanished_client_on_a_failed_device);
    tcase_add_test(tc, test_one_stream_uses_every_device);
    tcase_add_test(tc, test_bzip2_compress_goes_to_device);
    tcase_add_test(tc, test_bzip2_decompress_goes_to_device);
    tcase_add_test(tc, test_bzip2_decompress_into_unsizable_memfd);
    tcase_add_test(tc, test_bzip2_decompress_break_even_of_its_own);
    tcase_add_test(tc, test_bzip2_decompress_break_even_setting);
    tcase_add_test(tc, test_bzip2_decompress_device_failure_reruns_on_cpu);
    tcase_add_test(tc, test_bzip2_corrupt_stream_gets_cpu_verdict);
    tcase_add_test(tc, test_bzip2_decompress_max_output_on_device);
    tcase_add_test(tc, test_device_limit_reruns_on_cpu);
    tcase_add_test(tc, test_rle_concatenated_frames_run_on_cpu);
    tcase_add_test(tc, test_memfd_transport);
    tcase_add_test(tc, test_memfd_refused_request_keeps_fds_in_step);
    tcase_add_test(tc, test_memfd_refuses_unsealable_fd);
    suite_add_tcase(s, tc);
    TCase *reg = tcase_create("registered-buffers");
    tcase_add_checked_fixture(reg, NULL, teardown);
    tcase_set_timeout(reg, 60);
    tcase_add_test(reg, test_registered_buffers_round_trip);
    tcase_add_test(reg, test_register_limit_enforced);
    tcase_add_test(reg, test_register_refuses_bad_descriptors);
    tcase_add_test(reg, test_registration_ends_with_connection);
    tcase_add_test(reg, test_register_without_device_maps_only);
    tcase_add_test(reg, test_register_without_descriptor_is_protocol_error);
    suite_add_tcase(s, reg);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
