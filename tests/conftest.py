import ember

# In tests an internal capture error fails loudly instead of quietly running eagerly.
ember.config.set(raise_capture_errors=True)
# A lowering rule that crashes fails the test instead of quietly becoming an ATen call.
ember.config.set(raise_lowering_errors=True)
