def fetch_data(source):
    return f'data from {source}'
