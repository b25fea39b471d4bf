"""Turn streamed token ids into text deltas that never split a character or leak a stop string."""
