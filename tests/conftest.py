import ember

# In tests an internal capture error fails loudly instead of quietly running eagerly.
ember.config.set(raise_capture_errors=True)
