/* The NCCL profiler ABI as the fake-NCCL harness sees it: descriptors v4, v6 (= v5 plus CE
 * members) and v7, the state-argument union, the function tables, event bits and states.
 * Hand-written from the byte layouts in the project's ABI reference; the static assertions
 * below check the same offsets the Rust side checks, independently. */
#ifndef COMMLENS_FAKE_NCCL_H
#define COMMLENS_FAKE_NCCL_H

#include <stddef.h>
#include <stdint.h>
#include <stdbool.h>
#include <sys/types.h>

typedef int ncclResult_t;
typedef void (*ncclDebugLogger_t)(int level, unsigned long flags, const char* file, int line, const char* fmt, ...);

enum {
  EV_GROUP = 1 << 0, EV_COLL = 1 << 1, EV_P2P = 1 << 2, EV_PROXY_OP = 1 << 3, EV_PROXY_STEP = 1 << 4,
  EV_PROXY_CTRL = 1 << 5, EV_KERNEL_CH = 1 << 6, EV_NET_PLUGIN = 1 << 7, EV_GROUP_API = 1 << 8,
  EV_COLL_API = 1 << 9, EV_P2P_API = 1 << 10, EV_KERNEL_LAUNCH = 1 << 11, EV_CE_COLL = 1 << 12,
  EV_CE_SYNC = 1 << 13, EV_CE_BATCH = 1 << 14, EV_KERNEL_PHASE = 1 << 15
};

enum {
  ST_SEND_GPU_WAIT = 8, ST_SEND_WAIT = 9, ST_RECV_WAIT = 10, ST_RECV_FLUSH_WAIT = 11, ST_RECV_GPU_WAIT = 12,
  ST_CTRL_IDLE = 13, ST_CTRL_ACTIVE = 14, ST_CTRL_SLEEP = 15, ST_CTRL_WAKEUP = 16, ST_CTRL_APPEND = 17,
  ST_CTRL_APPEND_END = 18, ST_PROXY_OP_IN_PROGRESS_V4 = 19, ST_SEND_PEER_WAIT_V4 = 20, ST_NET_UPDATE = 21,
  ST_KERNEL_CH_STOP = 22, ST_GROUP_START_API_STOP = 23, ST_GROUP_END_API_START = 24, ST_KERNEL_PHASE_STOP = 31
};

struct coll_v4 {
  uint64_t seqNumber; const char* func; void const* sendBuff; void* recvBuff; size_t count; int root;
  const char* datatype; uint8_t nChannels; uint8_t nWarps; const char* algo; const char* proto;
};
struct p2p_v4 { const char* func; void* buff; const char* datatype; size_t count; int peer; uint8_t nChannels; };
struct proxy_op { pid_t pid; uint8_t channelId; int peer; int nSteps; int chunkSize; int isSend; };
struct kernel_ch { uint8_t channelId; uint64_t pTimer; };
struct net_plugin { int64_t id; void* data; };

typedef struct {
  uint8_t type; void* parentObj; int rank;
  union {
    struct coll_v4 coll;
    struct p2p_v4 p2p;
    struct proxy_op proxyOp;
    struct { int step; } proxyStep;
    struct kernel_ch kernelCh;
    struct net_plugin netPlugin;
  };
} descr4_t;

typedef struct {
  uint64_t type; void* parentObj; int rank;
  union {
    struct { bool graphCaptured; int groupDepth; } groupApi;
    struct { const char* func; size_t count; const char* datatype; int root; void* stream; bool graphCaptured; } collApi;
    struct { const char* func; size_t count; const char* datatype; void* stream; bool graphCaptured; } p2pApi;
    struct { void* stream; } kernelLaunch;
    struct { struct coll_v4 c; void* parentGroup; } coll;
    struct { struct p2p_v4 p; void* parentGroup; } p2p;
    struct proxy_op proxyOp;
    struct { int step; } proxyStep;
    struct kernel_ch kernelCh;
    struct net_plugin netPlugin;
    struct {
      uint64_t seqNumber; const char* func; void const* sendBuff; void* recvBuff; size_t count; int root;
      const char* datatype; const char* syncStrategy; bool intraBatchSync; uint32_t batchSize;
      uint32_t numBatches; uint32_t ceSeqNum; void* stream;
    } ceColl;
    struct { bool isComplete; int nRanks; } ceCollSync;
    struct { int numOps; size_t totalBytes; bool useIntraSync; } ceCollBatch;
  };
} descr6_t; /* v5 is the same layout without the three CE members */

typedef struct {
  uint64_t type; void* parentObj; int rank;
  union {
    struct { bool graphCaptured; int groupDepth; } groupApi;
    struct { const char* func; size_t count; const char* datatype; int root; void* stream; bool graphCaptured;
             uint64_t userTag; } collApi;
    struct { void* stream; } kernelLaunch;
    struct { struct coll_v4 c; void* parentGroup; const char* kernelVariant; bool isSymColl; uint64_t userTag; } coll;
    struct kernel_ch kernelCh;
    struct { uint8_t channelId; uint8_t phaseId; const char* phaseName; uint64_t pTimer; } kernelPhase;
  };
} descr7_t;

typedef union { size_t transSize; int appendedProxyOps; void* data; uint64_t pTimer; } sargs_t;

typedef struct { uint8_t type; struct { int device; uint64_t wr_id; int opcode; int qpNum; size_t length; } qp; } net_ib_v1_t;

typedef struct {
  const char* name;
  ncclResult_t (*init)(void** ctx, uint64_t commId, int* mask, const char* name, int nNodes, int nranks, int rank,
                       ncclDebugLogger_t logfn);
  ncclResult_t (*startEvent)(void* ctx, void** handle, void* descr);
  ncclResult_t (*stopEvent)(void* handle);
  ncclResult_t (*recordEventState)(void* handle, int state, sargs_t* args);
  ncclResult_t (*finalize)(void* ctx);
} prof_t; /* v5, v6, v7 */

typedef struct {
  const char* name;
  ncclResult_t (*init)(void** ctx, int* mask, const char* name, uint64_t commHash, int nNodes, int nranks, int rank,
                       ncclDebugLogger_t logfn);
  ncclResult_t (*startEvent)(void* ctx, void** handle, void* descr);
  ncclResult_t (*stopEvent)(void* handle);
  ncclResult_t (*recordEventState)(void* handle, int state, sargs_t* args);
  ncclResult_t (*finalize)(void* ctx);
} prof4_t;

_Static_assert(sizeof(descr4_t) == 104, "v4 descriptor size");
_Static_assert(sizeof(descr6_t) == 112, "v6 descriptor size");
_Static_assert(sizeof(descr7_t) == 136, "v7 descriptor size");
_Static_assert(sizeof(sargs_t) == 8, "state args");
_Static_assert(sizeof(prof_t) == 48 && sizeof(prof4_t) == 48, "function tables");
_Static_assert(offsetof(descr6_t, groupApi.groupDepth) == 28, "groupApi");
_Static_assert(offsetof(descr6_t, collApi.graphCaptured) == 64, "collApi");
_Static_assert(offsetof(descr6_t, p2pApi.graphCaptured) == 56, "p2pApi");
_Static_assert(offsetof(descr6_t, coll.c.nWarps) == 81 && offsetof(descr6_t, coll.parentGroup) == 104, "coll");
_Static_assert(offsetof(descr6_t, p2p.p.nChannels) == 60 && offsetof(descr6_t, p2p.parentGroup) == 64, "p2p");
_Static_assert(offsetof(descr6_t, proxyOp.isSend) == 44 && offsetof(descr6_t, kernelCh.pTimer) == 32, "proxy");
_Static_assert(offsetof(descr6_t, ceColl.stream) == 104 && offsetof(descr6_t, ceCollBatch.useIntraSync) == 40, "ce");
_Static_assert(offsetof(descr7_t, collApi.userTag) == 72, "v7 collApi");
_Static_assert(offsetof(descr7_t, coll.kernelVariant) == 112 && offsetof(descr7_t, coll.userTag) == 128, "v7 coll");
_Static_assert(offsetof(descr7_t, kernelPhase.pTimer) == 40, "v7 kernelPhase");
_Static_assert(offsetof(descr4_t, coll.proto) == 96 && offsetof(descr4_t, rank) == 16, "v4");
_Static_assert(offsetof(net_ib_v1_t, qp.length) == 32, "net ib v1");

#endif
