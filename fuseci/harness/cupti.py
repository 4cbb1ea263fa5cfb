"""Hardware counters collected inside the measured process: CUPTI's Range Profiler over ctypes,
one range per kernel, each kernel named with its launch shape by a driver-API callback. Every
parameter block's ``structSize`` is the size up to the last field this module knows, so one layout
serves every CUPTI from 12.6 on."""

from __future__ import annotations

import ctypes
import logging
import os
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from ctypes import c_char_p, c_int, c_size_t, c_uint8, c_uint16, c_uint32, c_void_p
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from fuseci.errors import HarnessError

log = logging.getLogger(__name__)

#: Where to look for libcupti after the process's own and ``FUSECI_CUPTI_LIBRARY``.
TOOLKIT_LIBRARIES = (
    "/usr/local/cuda/extras/CUPTI/lib64/libcupti.so.13",
    "/usr/local/cuda/extras/CUPTI/lib64/libcupti.so.12",
)
LIBRARY_ENV = "FUSECI_CUPTI_LIBRARY"

# CUpti_ProfilerRange, CUpti_ProfilerReplayMode, CUpti_ProfilerType, CUpti_CacheControl_Mode
AUTO_RANGE = 1
REPLAY = {"kernel": 2, "user": 3}
RANGE_PROFILER = 0
CACHE_CONTROL = {"none": 0, "all": 1, "l2": 2}
DRIVER_API = 1  # CUPTI_CB_DOMAIN_DRIVER_API
INVALID_PARAMETER = 1  # CUPTI_ERROR_INVALID_PARAMETER
API_ENTER = 0
#: cbids of the driver's kernel launches whose parameter block starts as cuLaunchKernel's
#: (function, grid, block, dynamic shared memory), and of those that take a CUlaunchConfig.
LAUNCH_PLAIN = {307: "cuLaunchKernel", 442: "cuLaunchKernel_ptsz", 477: "cuLaunchCooperativeKernel"}
LAUNCH_CONFIG = {652: "cuLaunchKernelEx", 653: "cuLaunchKernelEx_ptsz"}
GRAPH_LAUNCH = {514: "cuGraphLaunch", 515: "cuGraphLaunch_ptsz"}
CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES = 1
CU_FUNC_ATTRIBUTE_NUM_REGS = 4

#: CUptiResult codes with a cause fuseci names (cupti_result.h).
CAUSES = {
    15: "CUPTI is not initialized",
    17: "the CUPTI in use is newer than the driver supports",
    26: "the counters are held by another profiler (DCGM or another tool: pause it with `dcgmi profile --pause`)",
    35: "profiling is restricted to admin users (run as root, or set NVreg_RestrictProfilingToAdminUsers=0)",
    36: "an older profiler API is already initialized in this process",
    39: "the CUPTI in use does not support this device",
    43: "profiling on a MIG slice is not supported",
}


def _struct(*fields: tuple[str, Any]) -> type[ctypes.Structure]:
    """A parameter block: ``structSize`` and ``pPriv`` first, then ``fields``."""
    return type("Params", (ctypes.Structure,), {"_fields_": [("structSize", c_size_t), ("pPriv", c_void_p), *fields]})


def _size(struct: type[ctypes.Structure], last: str) -> int:
    """CUPTI_PROFILER_STRUCT_SIZE: the size of ``struct`` up to and including ``last``."""
    f = getattr(struct, last)
    return int(f.offset + f.size)


InitializeP = _struct()
ChipNameP = _struct(("deviceIndex", c_size_t), ("pChipName", c_char_p))
AvailabilityP = _struct(
    ("ctx", c_void_p),
    ("counterAvailabilityImageSize", c_size_t),
    ("pCounterAvailabilityImage", c_void_p),
    ("bAllowDeviceLevelCounters", c_uint8),
)
HostInitializeP = _struct(
    ("profilerType", c_int),
    ("pChipName", c_char_p),
    ("pCounterAvailabilityImage", c_void_p),
    ("pHostObject", c_void_p),
    ("pSinglePassMetricSetName", c_char_p),
)
HostObjectP = _struct(("pHostObject", c_void_p))
AddMetricsP = _struct(("pHostObject", c_void_p), ("ppMetricNames", ctypes.POINTER(c_char_p)), ("numMetrics", c_size_t))
ConfigSizeP = _struct(("pHostObject", c_void_p), ("configImageSize", c_size_t))
ConfigImageP = _struct(("pHostObject", c_void_p), ("configImageSize", c_size_t), ("pConfigImage", c_void_p))
PassesP = _struct(("configImageSize", c_size_t), ("pConfigImage", c_void_p), ("numOfPasses", c_size_t))
EvaluateP = _struct(
    ("pHostObject", c_void_p),
    ("pCounterDataImage", c_void_p),
    ("counterDataImageSize", c_size_t),
    ("rangeIndex", c_size_t),
    ("ppMetricNames", ctypes.POINTER(c_char_p)),
    ("numMetrics", c_size_t),
    ("pMetricValues", ctypes.POINTER(ctypes.c_double)),
)
EnableP = _struct(("ctx", c_void_p), ("pRangeProfilerObject", c_void_p), ("cacheControlMode", c_int))
ObjectP = _struct(("pRangeProfilerObject", c_void_p))
StopP = _struct(
    ("pRangeProfilerObject", c_void_p),
    ("passIndex", c_size_t),
    ("targetNestingLevel", c_size_t),
    ("isAllPassSubmitted", c_uint8),
)
DecodeP = _struct(("pRangeProfilerObject", c_void_p), ("numOfRangeDropped", c_size_t))
DataSizeP = _struct(
    ("pRangeProfilerObject", c_void_p),
    ("pMetricNames", ctypes.POINTER(c_char_p)),
    ("numMetrics", c_size_t),
    ("maxNumOfRanges", c_size_t),
    ("maxNumRangeTreeNodes", c_uint32),
    ("counterDataSize", c_size_t),
)
DataInitializeP = _struct(("pRangeProfilerObject", c_void_p), ("counterDataSize", c_size_t), ("pCounterData", c_void_p))
SetConfigP = _struct(
    ("pRangeProfilerObject", c_void_p),
    ("configSize", c_size_t),
    ("pConfig", c_void_p),
    ("counterDataImageSize", c_size_t),
    ("pCounterDataImage", c_void_p),
    ("range", c_int),
    ("replayMode", c_int),
    ("maxRangesPerPass", c_size_t),
    ("numNestingLevels", c_uint16),
    ("minNestingLevel", c_uint16),
    ("passIndex", c_size_t),
    ("targetNestingLevel", c_uint16),
)
DataInfoP = _struct(("pCounterDataImage", c_void_p), ("counterDataImageSize", c_size_t), ("numTotalRanges", c_size_t))
RangeInfoP = _struct(
    ("pCounterDataImage", c_void_p),
    ("counterDataImageSize", c_size_t),
    ("rangeIndex", c_size_t),
    ("rangeDelimiter", c_char_p),
    ("rangeName", c_char_p),
)


class CallbackData(ctypes.Structure):
    """CUpti_CallbackData (cupti_callbacks.h), the fields read here."""

    _fields_ = [
        ("callbackSite", c_int),
        ("functionName", c_char_p),
        ("functionParams", c_void_p),
        ("functionReturnValue", c_void_p),
        ("symbolName", c_char_p),
        ("context", c_void_p),
        ("contextUid", c_uint32),
        ("correlationData", c_void_p),
        ("correlationId", c_uint32),
    ]


class LaunchPlain(ctypes.Structure):
    """cuLaunchKernel_params (and _ptsz, cuLaunchCooperativeKernel): the leading fields."""

    _fields_ = [("f", c_void_p), *((n, ctypes.c_uint) for n in ("gx", "gy", "gz", "bx", "by", "bz", "smem"))]


class LaunchConfig(ctypes.Structure):
    """CUlaunchConfig: the leading fields."""

    _fields_ = [(n, ctypes.c_uint) for n in ("gx", "gy", "gz", "bx", "by", "bz", "smem")]


class LaunchEx(ctypes.Structure):
    """cuLaunchKernelEx_params: the leading fields."""

    _fields_ = [("config", ctypes.POINTER(LaunchConfig)), ("f", c_void_p)]


CALLBACK = ctypes.CFUNCTYPE(None, c_void_p, c_int, c_uint32, c_void_p)


@dataclass(slots=True)
class DriverLaunch:
    """One kernel launch seen by the driver callback."""

    name: str
    api: str
    grid: int = 0
    block: int = 0
    registers: int = 0
    shared_static: int = 0
    shared_dynamic: int = 0


@dataclass(slots=True)
class Collected:
    """What one :meth:`Counters.collect` saw: per kernel range, its name and metric values; the
    launches the callback saw in the same window; the ranges CUPTI dropped; and its cost."""

    ranges: list[tuple[str, dict[str, float]]] = field(default_factory=list)
    launches: list[DriverLaunch] = field(default_factory=list)
    dropped: int = 0
    seconds_call: float = 0.0
    seconds_decode: float = 0.0


def loaded_library() -> str | None:
    """The path of the libcupti this process already has mapped (PyTorch's, say), if any."""
    try:
        maps = Path("/proc/self/maps").read_text()
    except OSError:
        return None
    for line in maps.splitlines():
        path = line.split()[-1] if line.split() else ""
        if "/libcupti.so" in path:
            return path
    return None


def wheel_library() -> str | None:
    """libcupti of an installed ``nvidia-cuda-cupti`` wheel (CUDA 13's layout, then 12's)."""
    for entry in sys.path:
        for rel in ("nvidia/cu13/lib/libcupti.so.13", "nvidia/cuda_cupti/lib/libcupti.so.12"):
            p = Path(entry) / rel
            if p.is_file():
                return str(p)
    return None


def find_library() -> str:
    """Which libcupti to load: ``FUSECI_CUPTI_LIBRARY``, the process's own, the wheel's, the toolkit's.

    Raises:
        HarnessError: none is found.
    """
    for candidate in (os.environ.get(LIBRARY_ENV), loaded_library(), wheel_library(), *TOOLKIT_LIBRARIES):
        if candidate and Path(candidate).is_file():
            return candidate
    raise HarnessError(
        "no libcupti found: install the nvidia-cuda-cupti wheel matching the driver "
        f"(`pip install nvidia-cuda-cupti`), or name one with {LIBRARY_ENV}"
    )


class Counters:
    """The Range Profiler on the current CUDA context, configured for ``metrics``.

    Raises:
        HarnessError: libcupti cannot load, profiling is refused, or a metric is unknown to the chip; it says why.
    """

    def __init__(
        self,
        metrics: Sequence[str],
        device: int = 0,
        cache_control: str = "none",
        max_ranges: int = 512,
        replay: str = "kernel",
    ) -> None:
        self.path = find_library()
        self.lib = ctypes.CDLL(self.path, mode=ctypes.RTLD_GLOBAL)
        self.cuda = ctypes.CDLL("libcuda.so.1")
        self.metrics = tuple(metrics)
        self._names = (c_char_p * len(self.metrics))(*(m.encode() for m in self.metrics))
        self.max_ranges = max_ranges
        self.replay = replay
        version = c_uint32(0)
        self._call("cuptiGetVersion", ctypes.byref(version))
        self.version = int(version.value)
        driver = ctypes.c_int(0)
        self.cuda.cuDriverGetVersion(ctypes.byref(driver))
        self.driver = int(driver.value)
        self._call("cuptiProfilerInitialize", self._params(InitializeP, "pPriv"))
        chip = self._params(ChipNameP, "pChipName", deviceIndex=device)
        self._call("cuptiDeviceGetChipName", chip)
        self.chip = (chip.pChipName or b"").decode()
        ctx = c_void_p()
        if self.cuda.cuCtxGetCurrent(ctypes.byref(ctx)) != 0 or not ctx.value:
            raise HarnessError("in-process counters need a current CUDA context; none is current")
        self.ctx = ctx
        # bAllowDeviceLevelCounters is newer than CUDA 13.0's CUPTI, which refuses the longer block
        avail = self._params(AvailabilityP, "bAllowDeviceLevelCounters", ctx=ctx)
        if int(self.lib.cuptiProfilerGetCounterAvailability(ctypes.byref(avail))) == INVALID_PARAMETER:
            avail = self._params(AvailabilityP, "pCounterAvailabilityImage", ctx=ctx)
            self._call("cuptiProfilerGetCounterAvailability", avail)
        self._availability = (c_uint8 * avail.counterAvailabilityImageSize)()
        avail.pCounterAvailabilityImage = ctypes.cast(self._availability, c_void_p)
        self._call("cuptiProfilerGetCounterAvailability", avail)
        host = self._params(
            HostInitializeP,
            "pSinglePassMetricSetName",
            profilerType=RANGE_PROFILER,
            pChipName=self.chip.encode(),
            pCounterAvailabilityImage=ctypes.cast(self._availability, c_void_p),
        )
        # pSinglePassMetricSetName (PM sampling) is newer than CUDA 13.0's CUPTI
        if int(self.lib.cuptiProfilerHostInitialize(ctypes.byref(host))) == INVALID_PARAMETER:
            host.structSize = _size(HostInitializeP, "pHostObject")
            self._call("cuptiProfilerHostInitialize", host)
        self.host = c_void_p(host.pHostObject)
        add = self._params(AddMetricsP, "numMetrics", pHostObject=self.host, ppMetricNames=self._names)
        add.numMetrics = len(self.metrics)
        self._call("cuptiProfilerHostConfigAddMetrics", add)
        size = self._params(ConfigSizeP, "configImageSize", pHostObject=self.host)
        self._call("cuptiProfilerHostGetConfigImageSize", size)
        self._config = (c_uint8 * size.configImageSize)()
        image = self._params(
            ConfigImageP,
            "pConfigImage",
            pHostObject=self.host,
            configImageSize=size.configImageSize,
            pConfigImage=ctypes.cast(self._config, c_void_p),
        )
        self._call("cuptiProfilerHostGetConfigImage", image)
        passes = self._params(
            PassesP, "numOfPasses", configImageSize=len(self._config), pConfigImage=ctypes.cast(self._config, c_void_p)
        )
        self._call("cuptiProfilerHostGetNumOfPasses", passes)
        self.passes = int(passes.numOfPasses)
        last = "cacheControlMode" if cache_control != "none" else "pRangeProfilerObject"
        enable = self._params(EnableP, last, ctx=ctx)
        if cache_control != "none":
            enable.cacheControlMode = CACHE_CONTROL[cache_control]
        self._call("cuptiRangeProfilerEnable", enable)
        self.cache_control = cache_control
        self.rp = c_void_p(enable.pRangeProfilerObject)
        data = self._params(
            DataSizeP,
            "counterDataSize",
            pRangeProfilerObject=self.rp,
            pMetricNames=self._names,
            numMetrics=len(self.metrics),
            maxNumOfRanges=max_ranges,
            maxNumRangeTreeNodes=max_ranges,
        )
        self._call("cuptiRangeProfilerGetCounterDataSize", data)
        self._data = (c_uint8 * data.counterDataSize)()
        self._launches: list[DriverLaunch] = []
        self._attributes: dict[int, tuple[int, int]] = {}
        self._callback = CALLBACK(self._on_callback)
        self._subscriber = c_void_p()
        self._call("cuptiSubscribe", ctypes.byref(self._subscriber), self._callback, None)
        for cbid in (*LAUNCH_PLAIN, *LAUNCH_CONFIG, *GRAPH_LAUNCH):
            self._call("cuptiEnableCallback", 1, self._subscriber, DRIVER_API, cbid)
        self._reset()

    @staticmethod
    def _params(struct: type[ctypes.Structure], last: str, **values: Any) -> Any:
        p = struct(**values)
        p.structSize = _size(struct, last)
        return p

    def _call(self, name: str, *args: Any) -> None:
        """Call ``name``, each parameter block by reference; an error is a HarnessError naming the cause."""
        refs = [ctypes.byref(a) if isinstance(a, ctypes.Structure) else a for a in args]
        code = int(getattr(self.lib, name)(*refs))
        if code != 0:
            text = c_char_p()
            self.lib.cuptiGetResultString(code, ctypes.byref(text))
            why = CAUSES.get(code, (text.value or b"").decode() or f"error {code}")
            raise HarnessError(f"in-process counters: {name} failed: {why} (CUPTI {code}, library {self.path})")

    def _image(self) -> dict[str, Any]:
        """The counter data image, as a parameter block's fields."""
        return {"pCounterDataImage": ctypes.cast(self._data, c_void_p), "counterDataImageSize": len(self._data)}

    def _reset(self) -> None:
        """An empty counter data image, and the configuration bound to it."""
        init = self._params(
            DataInitializeP,
            "pCounterData",
            pRangeProfilerObject=self.rp,
            counterDataSize=len(self._data),
            pCounterData=ctypes.cast(self._data, c_void_p),
        )
        self._call("cuptiRangeProfilerCounterDataImageInitialize", init)
        config = self._params(
            SetConfigP,
            "targetNestingLevel",
            pRangeProfilerObject=self.rp,
            configSize=len(self._config),
            pConfig=ctypes.cast(self._config, c_void_p),
            **self._image(),
            range=AUTO_RANGE,
            replayMode=REPLAY[self.replay],
            maxRangesPerPass=self.max_ranges,
            numNestingLevels=1,
            minNestingLevel=1,
            passIndex=0,
            targetNestingLevel=1,
        )
        self._call("cuptiRangeProfilerSetConfig", config)

    def _on_callback(self, _user: Any, domain: int, cbid: int, data: Any) -> None:
        """A driver-API launch: its kernel's name and shape (never raises into CUPTI)."""
        try:
            cb = ctypes.cast(data, ctypes.POINTER(CallbackData)).contents
            if cb.callbackSite != API_ENTER:
                return
            if cbid in GRAPH_LAUNCH:
                self._launches.append(DriverLaunch("<graph>", GRAPH_LAUNCH[cbid]))
                return
            name = (cb.symbolName or b"").decode(errors="replace")
            if cbid in LAUNCH_PLAIN:
                p = ctypes.cast(cb.functionParams, ctypes.POINTER(LaunchPlain)).contents
                f, dims, api = p.f, p, LAUNCH_PLAIN[cbid]
            else:
                ex = ctypes.cast(cb.functionParams, ctypes.POINTER(LaunchEx)).contents
                f, dims, api = ex.f, ex.config.contents, LAUNCH_CONFIG[cbid]
            regs, static = self._function(f)
            self._launches.append(
                DriverLaunch(
                    name,
                    api,
                    grid=dims.gx * dims.gy * dims.gz,
                    block=dims.bx * dims.by * dims.bz,
                    registers=regs,
                    shared_static=static,
                    shared_dynamic=dims.smem,
                )
            )
        except Exception:  # a callback must not unwind into the driver
            log.exception("in-process counters: launch callback failed")

    def _function(self, f: int | None) -> tuple[int, int]:
        """Registers per thread and static shared memory of the launched function (or, for a
        ``CUkernel``, which ``cuFuncGetAttribute`` refuses, of its function in this context)."""
        if not f:
            return 0, 0
        if f not in self._attributes:
            handle = c_void_p(f)
            regs, static = ctypes.c_int(0), ctypes.c_int(0)
            if self.cuda.cuFuncGetAttribute(ctypes.byref(regs), CU_FUNC_ATTRIBUTE_NUM_REGS, handle) != 0:
                function = c_void_p()
                if self.cuda.cuKernelGetFunction(ctypes.byref(function), handle) == 0:
                    handle = function
                self.cuda.cuFuncGetAttribute(ctypes.byref(regs), CU_FUNC_ATTRIBUTE_NUM_REGS, handle)
            self.cuda.cuFuncGetAttribute(ctypes.byref(static), CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES, handle)
            self._attributes[f] = (int(regs.value), int(static.value))
        return self._attributes[f]

    @contextmanager
    def _pass(self, synchronize: Callable[[], None]) -> Iterator[list[bool]]:
        """One pass around the block; the list it yields then holds whether every pass was submitted."""
        submitted: list[bool] = []
        self._call(
            "cuptiRangeProfilerStart", self._params(ObjectP, "pRangeProfilerObject", pRangeProfilerObject=self.rp)
        )
        try:
            yield submitted
            synchronize()
        finally:
            stop = self._params(StopP, "isAllPassSubmitted", pRangeProfilerObject=self.rp)
            self._call("cuptiRangeProfilerStop", stop)
        submitted.append(bool(stop.isAllPassSubmitted))

    @contextmanager
    def window(self, synchronize: Callable[[], None], again: Callable[[], Any] | None = None) -> Iterator[Collected]:
        """Count every kernel launched inside the ``with`` block, one range per kernel; with user replay
        (``replay="user"``) the passes before the block's run ``again()``, a call that launches the same kernels.

        Raises:
            HarnessError: CUPTI refused a step, or a pass was left unsubmitted.
        """
        out = Collected()
        started = time.perf_counter()
        if self.replay == "user" and self.passes > 1:
            if again is None:
                raise HarnessError("in-process counters: user replay needs the call to run again for each pass")
            for _ in range(self.passes - 1):
                self._launches = []  # the same launches as the block's: counted there
                with self._pass(synchronize) as submitted:
                    again()
                if submitted[0]:
                    raise HarnessError("in-process counters: CUPTI took fewer passes than it said it needs")
        self._launches = out.launches
        try:
            with self._pass(synchronize) as submitted:
                yield out
        finally:
            self._launches = []
        out.seconds_call = time.perf_counter() - started
        if not submitted[0]:
            raise HarnessError("in-process counters: CUPTI did not submit every replay pass of the window")
        started = time.perf_counter()
        decode = self._params(DecodeP, "numOfRangeDropped", pRangeProfilerObject=self.rp)
        self._call("cuptiRangeProfilerDecodeData", decode)
        out.dropped = int(decode.numOfRangeDropped)
        info = self._params(DataInfoP, "numTotalRanges", **self._image())
        self._call("cuptiRangeProfilerGetCounterDataInfo", info)
        values = (ctypes.c_double * len(self.metrics))()
        for i in range(int(info.numTotalRanges)):
            rng = self._params(RangeInfoP, "rangeName", **self._image(), rangeIndex=i, rangeDelimiter=b"/")
            self._call("cuptiRangeProfilerCounterDataGetRangeInfo", rng)
            ev = self._params(
                EvaluateP,
                "pMetricValues",
                pHostObject=self.host,
                **self._image(),
                rangeIndex=i,
                ppMetricNames=self._names,
                numMetrics=len(self.metrics),
                pMetricValues=values,
            )
            self._call("cuptiProfilerHostEvaluateToGpuValues", ev)
            out.ranges.append(
                ((rng.rangeName or b"").decode(errors="replace"), dict(zip(self.metrics, values, strict=False)))
            )
        self._reset()
        out.seconds_decode = time.perf_counter() - started

    def close(self) -> None:
        """Unsubscribe, disable the profiler and free the host object (once)."""
        if getattr(self, "_closed", False):
            return
        self._closed = True
        self.lib.cuptiUnsubscribe(self._subscriber)
        disable = self._params(ObjectP, "pRangeProfilerObject", pRangeProfilerObject=self.rp)
        self.lib.cuptiRangeProfilerDisable(ctypes.byref(disable))
        self.lib.cuptiProfilerHostDeinitialize(
            ctypes.byref(self._params(HostObjectP, "pHostObject", pHostObject=self.host))
        )
