"""What eager really does, asked of eager itself: an op run once on small real tensors (does its
kernel accept these dtypes and devices, which layout does it give its result), each answer
cached per signature.  Below every stage: capture, the AOT tracer and lowering ask the same
questions and must get the same answers."""
