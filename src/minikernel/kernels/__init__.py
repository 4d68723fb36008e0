"""Kernel packages, one per op. Each exposes its public function and a ``VARIANTS`` registry."""
