"""DefaultBinder: binds through the pods/binding subresource."""
