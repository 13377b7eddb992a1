"""LR-conditioned velocity / average-velocity backbones with the (r, t) interval embedding.

Every backbone maps ``(z, r, t, lr) -> u`` with ``z`` the noisy HR image (B, C, H, W), ``lr`` the LR
image (B, C, H/4, W/4; bicubic-upsampled inside, the DiT4SR condition) and ``r <= t`` of shape (B,).

Interval embedding (``IntervalEmbedding``), e_x = TimeMLP(sinusoid(1000 x)) shared by both times:

- ``mode=None`` (the stage-0 teacher): temb = e_t (r is ignored: the model is v_phi(z, t | y));
- ``mode="residual"`` (our default student): temb = e_t + MLP_0([e_t ; e_second]) with the last
  layer of MLP_0 zero-initialised, so u_theta(z, r, t | y) == v_phi(z, t | y) exactly at step 0;
- ``mode="released"`` (the authors' released, non-residual form): temb = Linear(SiLU(Linear([e_r ; e_t])))
  with both layers initialised N(0, 0.02) (for checkpoint compatibility; not teacher-preserving).

``second`` is ``"t-r"`` (the ``mlp`` mapping: e_{t - r}) or ``"r"`` (the released code: e_r).

Every backbone splits into ``conditioning(r, t)`` (everything that depends on the interval alone:
the interval embedding and each block's FiLM / adaLN modulation) and ``trunk(z, lr, cond)``.
``forward_at(z, r, t, lr)`` evaluates one interval (r, t) shared by the whole batch (the sampler's grid
steps; one-step inference is (0, 1)); without autograd recording it caches the conditioning per
(r, t, batch, dtype, device) and recomputes it whenever a parameter it reads changes (in-place updates
bump a parameter's version counter; replaced storage changes its data pointer). The cached tensors are
the ones the uncached path computes (same ops, same shapes), so both paths are bitwise equal.
Updates through ``p.data`` bypass the version counter: call ``clear_interval_cache()`` after them.

Backbones: ``mlp`` (quick: grey 16 x 16, 3 FiLM residual layers of width 256), ``dit`` (TinyDiT4SR:
the same patch embedding for z and LR tokens plus a stream embedding, joint attention over
[z ; LR] tokens with ``scaled_dot_product_attention``, adaLN-Zero, output the first half of tokens),
``unet`` (2-level UNet on channel-concat [z, up(lr)], FiLM time conditioning).
"""

from __future__ import annotations

import copy
import math
import weakref
from collections import OrderedDict
from typing import Callable

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.checkpoint import checkpoint

from neurips26.harness.validation import check_choice, check_scalar
from neurips26.smfsr.base import SCALE, upsample
from neurips26.smfsr.flows import check_times

BACKBONES = ("mlp", "dit", "unet")
INTERVAL_MODES = (None, "residual", "released")
COND_CACHE_SIZE = 128  # cached (r, t, batch, ...) entries per model (teacher-50 walks 50 grid steps)
# model -> OrderedDict of cached conditionings; outside the module so that deepcopy / state_dict /
# pickling never carry it (a copied model starts with an empty cache)
_COND_CACHE: weakref.WeakKeyDictionary[nn.Module, OrderedDict] = weakref.WeakKeyDictionary()


def _params(*modules: nn.Module) -> list[nn.Parameter]:
    """Every parameter of ``modules`` and their children (``Module.parameters`` order, no dedup), by a
    direct walk of ``_parameters`` / ``_modules`` (``parameters()`` costs ~20 us on these models)."""
    out = []
    stack = list(reversed(modules))
    while stack:
        m = stack.pop()
        out.extend(p for p in m._parameters.values() if p is not None)
        stack.extend(c for c in reversed(m._modules.values()) if c is not None)
    return out


def sinusoid(x: torch.Tensor, dim: int, scale: float = 1000.0, max_period: float = 10000.0) -> torch.Tensor:
    """[cos(scale x w_k), sin(scale x w_k)], w_k = max_period^(-k / (dim/2)) (DiT's embedder)."""
    half = dim // 2
    freqs = torch.exp(-math.log(max_period) * torch.arange(half, dtype=torch.float32, device=x.device) / half)
    args = scale * x.float()[:, None] * freqs[None]
    return torch.cat([torch.cos(args), torch.sin(args)], dim=-1).to(x.dtype if x.is_floating_point()
                                                                    else torch.float32)


class IntervalEmbedding(nn.Module):
    """temb(r, t) in one of ``INTERVAL_MODES`` (see the module docstring)."""

    def __init__(self, dim: int, freq_dim: int = 64, mode: str | None = None, second: str = "t-r"):
        super().__init__()
        self.dim, self.freq_dim = dim, freq_dim
        self.second = check_choice(second, "second", ("t-r", "r"))
        self.time_mlp = nn.Sequential(nn.Linear(freq_dim, dim), nn.SiLU(), nn.Linear(dim, dim))
        self.mode = None
        self.interval_mlp = None
        if mode is not None:
            self.enable(mode)

    def enable(self, mode: str) -> None:
        """Turn the teacher's e_t into an interval embedding (adds the interval MLP)."""
        self.mode = check_choice(mode, "mode", ("residual", "released"))
        lin1, lin2 = nn.Linear(2 * self.dim, self.dim), nn.Linear(self.dim, self.dim)
        if mode == "residual":
            nn.init.zeros_(lin2.weight)
            nn.init.zeros_(lin2.bias)
        else:
            for lin in (lin1, lin2):
                nn.init.normal_(lin.weight, std=0.02)
                nn.init.zeros_(lin.bias)
        p = next(self.time_mlp.parameters())
        self.interval_mlp = nn.Sequential(lin1, nn.SiLU(), lin2).to(device=p.device, dtype=p.dtype)

    def embed(self, x: torch.Tensor) -> torch.Tensor:
        p = next(self.time_mlp.parameters())
        return self.time_mlp(sinusoid(x, self.freq_dim).to(p.dtype))

    def forward(self, r: torch.Tensor, t: torch.Tensor) -> torch.Tensor:
        if self.mode is None:
            return self.embed(t)
        # both times through the shared TimeMLP in one call (the same values as two calls)
        second = r if (self.mode == "released" or self.second == "r") else t - r
        e_t, e_2 = self.embed(torch.cat([t, second])).split(t.shape[0])
        if self.mode == "released":
            return self.interval_mlp(torch.cat([e_2, e_t], dim=-1))
        return e_t + self.interval_mlp(torch.cat([e_t, e_2], dim=-1))


class SRBackbone(nn.Module):
    """Common part: channels, HR size (None = any), the interval embedding, input checks."""

    name = "base"

    def __init__(self, channels: int, hr_size: int | None, dim: int, second: str):
        super().__init__()
        self.channels = check_scalar(channels, "channels", int, min=1)
        self.hr_size = hr_size
        self.temb = IntervalEmbedding(dim, 64 if dim <= 256 else 256, None, second)
        self.grad_checkpointing = False  # recompute each block in backward (``scale.enable_checkpointing``)

    def run_block(self, blk: nn.Module, *args) -> torch.Tensor:
        """``blk(*args)``, through ``torch.utils.checkpoint`` when gradient checkpointing is on and a
        gradient is being recorded (same values and gradients, fewer saved activations)."""
        if self.grad_checkpointing and torch.is_grad_enabled():
            return checkpoint(blk, *args, use_reentrant=False)
        return blk(*args)

    @property
    def interval_mode(self) -> str | None:
        return self.temb.mode

    # the interval / trunk split (per backbone): forward == trunk(z, lr, conditioning(r, t))
    def modulators(self) -> list[tuple[Callable, nn.Module]]:
        """(modulation fn, the module it reads) per modulated block in trunk order: the one list that both
        ``conditioning`` and ``conditioning_parameters`` (the cache key) walk, so they cannot diverge."""
        raise NotImplementedError

    def modulation_input(self, temb: torch.Tensor) -> torch.Tensor:
        """What the modulation fns take: the interval embedding (DiT's adaLN has its own SiLU)."""
        return F.silu(temb)

    def conditioning(self, r: torch.Tensor, t: torch.Tensor) -> tuple:
        """Everything the trunk needs from (r, t): one modulation tuple per entry of ``modulators``."""
        e = self.modulation_input(self.temb(r, t))
        return tuple(fn(e) for fn, _ in self.modulators())

    def trunk(self, z: torch.Tensor, lr: torch.Tensor, cond: tuple) -> torch.Tensor:
        raise NotImplementedError

    def forward(self, z, r, t, lr):
        self.check_inputs(z, r, t, lr)
        return self.trunk(z, lr, self.conditioning(r, t))

    def conditioning_parameters(self) -> list[nn.Parameter]:
        """The parameters ``conditioning`` reads (the cache's validity key): the interval embedding's and
        those of every module in ``modulators``."""
        return _params(self.temb, *(m for _, m in self.modulators()))

    def clear_interval_cache(self) -> None:
        _COND_CACHE.pop(self, None)

    def forward_at(self, z: torch.Tensor, r, t, lr: torch.Tensor) -> torch.Tensor:
        """u(z, r, t | lr) with one interval for the whole batch: ``r``, ``t`` Python floats or 0-d
        tensors (their dtype is the time dtype; floats take ``z``'s). Equal to
        ``forward(z, r.expand(B), t.expand(B), lr)``; the conditioning is cached when no gradient is
        being recorded (see the module docstring). Pass host floats (as ``euler_sample`` does): a 0-d
        device tensor is read back to the host for the checks and the cache key (one sync each)."""
        self.check_inputs(z, None, None, lr)
        times = []
        for name, x in (("r", r), ("t", t)):
            if isinstance(x, torch.Tensor):
                if x.ndim != 0:
                    raise ValueError(f"forward_at takes one interval (0-d r and t), got shapes "
                                     f"{tuple(torch.as_tensor(r).shape)} and {tuple(torch.as_tensor(t).shape)}")
                times.append((float(x), x.dtype, x))
            else:
                times.append((float(x), z.dtype, None))
        (fr, r_dtype, r_tensor), (ft, t_dtype, t_tensor) = times
        if not (math.isfinite(fr) and math.isfinite(ft)):
            raise ValueError("r and t must be finite")
        if not (-1e-6 <= fr <= ft + 1e-6 and ft <= 1 + 1e-6):
            raise ValueError(f"need 0 <= r <= t <= 1, got r = {fr:.4g}, t = {ft:.4g}")
        B = z.shape[0]

        def interval():  # (B,) time vectors on z's device (built only when the conditioning is computed)
            rr = r_tensor if r_tensor is not None else torch.tensor(fr, dtype=r_dtype)
            tt = t_tensor if t_tensor is not None else torch.tensor(ft, dtype=t_dtype)
            return rr.to(z.device).expand(B), tt.to(z.device).expand(B)

        if torch.is_grad_enabled():
            return self.trunk(z, lr, self.conditioning(*interval()))
        params = self.conditioning_parameters()
        key = (fr, ft, r_dtype, t_dtype, B, str(z.device), self.temb.mode)
        valid = tuple((p._version, p.data_ptr(), p.dtype) for p in params)
        cache = _COND_CACHE.get(self)
        if cache is None:
            cache = _COND_CACHE[self] = OrderedDict()
        hit = cache.get(key)
        if hit is not None and hit[1] == valid and all(a is b for a, b in zip(hit[0], params)):
            cache.move_to_end(key)
            cond = hit[2]
        else:
            cond = self.conditioning(*interval())
            cache[key] = (params, valid, cond)
            while len(cache) > COND_CACHE_SIZE:
                cache.popitem(last=False)
        return self.trunk(z, lr, cond)

    def check_inputs(self, z: torch.Tensor, r: torch.Tensor, t: torch.Tensor, lr: torch.Tensor) -> None:
        if z.ndim != 4 or z.shape[1] != self.channels:
            raise ValueError(f"z must be (B, {self.channels}, H, W), got {tuple(z.shape)}")
        if lr.ndim != 4 or lr.shape[1] != self.channels:
            raise ValueError(f"lr must be (B, {self.channels}, h, w), got {tuple(lr.shape)}")
        if z.shape[-2] != SCALE * lr.shape[-2] or z.shape[-1] != SCALE * lr.shape[-1]:
            raise ValueError(f"z size {tuple(z.shape[-2:])} must be {SCALE} x lr size {tuple(lr.shape[-2:])}")
        if self.hr_size is not None and tuple(z.shape[-2:]) != (self.hr_size, self.hr_size):
            raise ValueError(f"the {self.name} backbone takes {self.hr_size} x {self.hr_size} HR inputs "
                             f"(use tiled inference for larger images), got {tuple(z.shape[-2:])}")
        if r is not None:
            check_times(r, t, z.shape[0])


class FiLMBlock(nn.Module):
    def __init__(self, width: int, emb: int):
        super().__init__()
        self.norm = nn.LayerNorm(width, elementwise_affine=False)
        self.film = nn.Linear(emb, 2 * width)
        self.lin = nn.Linear(width, width)

    def modulation(self, e: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        return tuple(self.film(e).chunk(2, dim=-1))

    def apply_mod(self, h: torch.Tensor, scale: torch.Tensor, shift: torch.Tensor) -> torch.Tensor:
        return h + self.lin(F.silu(self.norm(h) * (1 + scale) + shift))

    def forward(self, h: torch.Tensor, e: torch.Tensor) -> torch.Tensor:
        return self.apply_mod(h, *self.modulation(e))


class MLPBackbone(SRBackbone):
    """``mlp``: [z ; up(lr)] flattened -> Linear -> 3 FiLM residual layers (SiLU) -> Linear."""

    name = "mlp"

    def __init__(self, channels: int = 1, hr_size: int = 16, width: int = 256, depth: int = 3, emb: int = 64):
        super().__init__(channels, check_scalar(hr_size, "hr_size", int, min=SCALE), emb, "t-r")
        d = channels * hr_size * hr_size
        # bicubic x4 is linear: up(lr).flatten() == lr.flatten() @ M (M from the identity basis; fast path
        # of base.upsample, tested equal to it)
        n = hr_size // SCALE
        basis = torch.eye(n * n).view(n * n, 1, n, n)
        self.register_buffer("up_matrix", upsample(basis).reshape(n * n, hr_size * hr_size), persistent=False)
        self.inp = nn.Linear(2 * d, width)
        self.blocks = nn.ModuleList([FiLMBlock(width, emb) for _ in range(depth)])
        self.out = nn.Linear(width, d)

    def modulators(self):
        return [(blk.modulation, blk.film) for blk in self.blocks]

    def trunk(self, z, lr, cond):
        B, C = lr.shape[:2]
        up = (lr.reshape(B * C, -1) @ self.up_matrix.to(lr.dtype)).reshape(B, -1)
        h = self.inp(torch.cat([z.flatten(1), up], dim=1))
        for blk, (scale, shift) in zip(self.blocks, cond):
            h = self.run_block(blk.apply_mod, h, scale, shift)
        return self.out(h).view_as(z)


# ---------------------------------------------------------------------------- TinyDiT4SR
def modulate(x, shift, scale):
    return x * (1 + scale[:, None]) + shift[:, None]


class DiTBlock(nn.Module):
    """Pre-norm transformer block with adaLN-Zero modulation and SDPA joint attention."""

    def __init__(self, dim: int, heads: int, mlp_ratio: float = 4.0):
        super().__init__()
        self.heads = heads
        self.norm1 = nn.LayerNorm(dim, elementwise_affine=False, eps=1e-6)
        self.qkv = nn.Linear(dim, 3 * dim)
        self.proj = nn.Linear(dim, dim)
        self.norm2 = nn.LayerNorm(dim, elementwise_affine=False, eps=1e-6)
        self.mlp = nn.Sequential(nn.Linear(dim, int(dim * mlp_ratio)), nn.GELU(approximate="tanh"),
                                 nn.Linear(int(dim * mlp_ratio), dim))
        self.ada = nn.Sequential(nn.SiLU(), nn.Linear(dim, 6 * dim))
        nn.init.zeros_(self.ada[1].weight)
        nn.init.zeros_(self.ada[1].bias)

    def modulation(self, c):
        return tuple(self.ada(c).chunk(6, dim=-1))

    def forward(self, x, c):
        return self.apply_mod(x, *self.modulation(c))

    def apply_mod(self, x, sh1, sc1, g1, sh2, sc2, g2):
        B, N, D = x.shape
        h = modulate(self.norm1(x), sh1, sc1)
        q, k, v = self.qkv(h).view(B, N, 3, self.heads, D // self.heads).permute(2, 0, 3, 1, 4)
        a = F.scaled_dot_product_attention(q, k, v).transpose(1, 2).reshape(B, N, D)
        x = x + g1[:, None] * self.proj(a)
        return x + g2[:, None] * self.mlp(modulate(self.norm2(x), sh2, sc2))


class TinyDiT4SR(SRBackbone):
    """``dit``: pixel-space DiT4SR stand-in; z and up(lr) tokens share the patch embedding (+ stream
    embedding + positional embedding), joint attention over [z ; LR] tokens, output first half."""

    name = "dit"

    def __init__(self, channels: int = 3, hr_size: int = 64, patch: int = 4, dim: int = 256, depth: int = 6,
                 heads: int = 4):
        super().__init__(channels, check_scalar(hr_size, "hr_size", int, min=SCALE), dim, "r")
        if hr_size % patch or dim % heads:
            raise ValueError(f"hr_size {hr_size} must be divisible by patch {patch} and dim {dim} by "
                             f"heads {heads}")
        self.patch, self.grid = patch, hr_size // patch
        n = self.grid ** 2
        self.embed = nn.Conv2d(channels, dim, patch, stride=patch)
        self.pos = nn.Parameter(torch.randn(1, n, dim) * 0.02)
        self.stream = nn.Parameter(torch.randn(2, dim) * 0.02)
        self.blocks = nn.ModuleList([DiTBlock(dim, heads) for _ in range(depth)])
        self.norm = nn.LayerNorm(dim, elementwise_affine=False, eps=1e-6)
        self.final_ada = nn.Sequential(nn.SiLU(), nn.Linear(dim, 2 * dim))
        self.final = nn.Linear(dim, patch * patch * channels)
        for lin in (self.final_ada[1], self.final):
            nn.init.zeros_(lin.weight)
            nn.init.zeros_(lin.bias)

    def tokens(self, img, stream: int):
        return self.embed(img).flatten(2).transpose(1, 2) + self.pos + self.stream[stream]

    def modulation_input(self, temb):
        return temb

    def final_modulation(self, c):
        return tuple(self.final_ada(c).chunk(2, dim=-1))

    def modulators(self):
        return [(blk.modulation, blk.ada) for blk in self.blocks] + [(self.final_modulation, self.final_ada)]

    def trunk(self, z, lr, cond):
        n = self.grid ** 2
        x = torch.cat([self.tokens(z, 0), self.tokens(upsample(lr), 1)], dim=1)
        for blk, mods in zip(self.blocks, cond[:-1]):
            x = self.run_block(blk.apply_mod, x, *mods)
        sh, sc = cond[-1]
        x = self.final(modulate(self.norm(x[:, :n]), sh, sc))
        B, p, C, g = z.shape[0], self.patch, self.channels, self.grid
        return x.view(B, g, g, p, p, C).permute(0, 5, 1, 3, 2, 4).reshape(B, C, g * p, g * p)


# ---------------------------------------------------------------------------- UNet
class ResBlock(nn.Module):
    def __init__(self, cin: int, cout: int, emb: int):
        super().__init__()
        self.n1, self.c1 = nn.GroupNorm(min(8, cin), cin), nn.Conv2d(cin, cout, 3, padding=1)
        self.film = nn.Linear(emb, 2 * cout)
        self.n2, self.c2 = nn.GroupNorm(min(8, cout), cout), nn.Conv2d(cout, cout, 3, padding=1)
        self.skip = nn.Conv2d(cin, cout, 1) if cin != cout else nn.Identity()

    def modulation(self, e):
        return tuple(self.film(e)[:, :, None, None].chunk(2, dim=1))

    def apply_mod(self, x, sc, sh):
        h = self.c1(F.silu(self.n1(x)))
        h = self.c2(F.silu(self.n2(h) * (1 + sc) + sh))
        return self.skip(x) + h

    def forward(self, x, e):
        return self.apply_mod(x, *self.modulation(e))


class UNetSR(SRBackbone):
    """``unet``: 2-level UNet on [z, up(lr)] with FiLM time conditioning (any HR size divisible by 2)."""

    name = "unet"

    def __init__(self, channels: int = 3, ch: int = 32, emb: int = 128):
        super().__init__(channels, None, emb, "t-r")
        self.inp = nn.Conv2d(2 * channels, ch, 3, padding=1)
        self.d1 = ResBlock(ch, ch, emb)
        self.down = nn.Conv2d(ch, 2 * ch, 3, stride=2, padding=1)
        self.mid = ResBlock(2 * ch, 2 * ch, emb)
        self.up = nn.ConvTranspose2d(2 * ch, ch, 2, stride=2)
        self.u1 = ResBlock(2 * ch, ch, emb)
        self.out = nn.Conv2d(ch, channels, 3, padding=1)

    def check_inputs(self, z, r, t, lr):
        super().check_inputs(z, r, t, lr)
        if z.shape[-1] % 2 or z.shape[-2] % 2:
            raise ValueError(f"the unet backbone needs an even HR size, got {tuple(z.shape[-2:])}")

    def modulators(self):
        return [(blk.modulation, blk.film) for blk in (self.d1, self.mid, self.u1)]

    def trunk(self, z, lr, cond):
        (m1, mm, mu) = cond
        h1 = self.run_block(self.d1.apply_mod, self.inp(torch.cat([z, upsample(lr)], dim=1)), *m1)
        h2 = self.run_block(self.mid.apply_mod, self.down(h1), *mm)
        return self.out(F.silu(self.run_block(self.u1.apply_mod, torch.cat([self.up(h2), h1], dim=1), *mu)))


def build_backbone(name: str, channels: int = 1, hr_size: int = 16, **kwargs) -> SRBackbone:
    """A fresh (teacher-mode) backbone by name: ``mlp``, ``dit`` or ``unet``."""
    name = check_choice(name, "backbone", BACKBONES)
    if name == "mlp":
        return MLPBackbone(channels, hr_size, **kwargs)
    if name == "dit":
        return TinyDiT4SR(channels, hr_size, **kwargs)
    return UNetSR(channels, **kwargs)


def make_student(teacher: SRBackbone, mode: str = "residual") -> SRBackbone:
    """A student u_theta initialised from the teacher v_phi, with the interval embedding enabled.

    ``mode="residual"`` (default): u_theta(z, r, t | y) == v_phi(z, t | y) for every r at step 0.
    ``mode="released"``: the authors' non-residual form (not teacher-preserving at step 0).
    """
    if not isinstance(teacher, SRBackbone):
        raise TypeError(f"teacher must be an SRBackbone, got {type(teacher).__name__}")
    if teacher.interval_mode is not None:
        raise ValueError("teacher already has an interval embedding (mode "
                         f"{teacher.interval_mode!r}); pass a stage-0 teacher")
    student = copy.deepcopy(teacher)
    student.temb.enable(mode)
    return student
