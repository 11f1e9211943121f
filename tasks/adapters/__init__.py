"""tasks/adapters"""
